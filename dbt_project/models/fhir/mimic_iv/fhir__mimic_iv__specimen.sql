{{ config(alias='specimen') }}
-- FHIR Specimens of the microbiology specimens of the MIMIC-IV profiles (one per micro_specimen_id among the
-- EHRSQL-2024 microbiologyevents rows, collected at their shifted charttime), shaped like MIMIC-IV on FHIR's
-- SpecimenMicro: type coded by spec_itemid (code system mimic-spec-type-desc) with MIMIC-IV's original
-- spec_type_desc, also as its text. Id from micro_specimen_id.
{{ fhir_micro_specimen_resources('int_ehrsql2024__mimic_iv__microbiologyevents') }}
