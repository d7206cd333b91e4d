{{ config(alias='observation_micro_org') }}
-- FHIR Observations of the organisms grown in the microbiology tests of the MIMIC-IV profiles: one per
-- test_itemid-micro_specimen_id-org_itemid among the EHRSQL-2024 microbiologyevents rows (shifted charttime), shaped
-- like MIMIC-IV on FHIR's ObservationMicroOrg: code = organism (original MIMIC-IV name), derivedFrom -> its test,
-- hasMember -> its susceptibility observations; without susceptibilities the comment (else 'No susceptibility data
-- present') is the valueString.
{{ fhir_micro_org_resources('int_ehrsql2024__mimic_iv__microbiologyevents') }}
