{{ config(alias='observation_micro_test') }}
-- FHIR Observations of the microbiology tests of the MIMIC-IV profiles: one per micro_specimen_id-test_itemid among
-- the EHRSQL-2024 microbiologyevents rows (shifted charttime), shaped like MIMIC-IV on FHIR's ObservationMicroTest:
-- the test's specimen and admission, hasMember -> its organism observations; a test without organism carries the
-- result comment as valueString, or a NullFlavor (de-identified '___' comment: MSK, none: NI). Original MIMIC-IV
-- test name.
{{ fhir_micro_test_resources('int_ehrsql2024__mimic_iv__microbiologyevents') }}
