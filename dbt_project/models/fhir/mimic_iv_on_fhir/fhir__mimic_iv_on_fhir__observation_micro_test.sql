{{ config(alias='observation_micro_test') }}
-- One Observation per microbiology test micro_specimen_id-test_itemid (sql/fhir_observation_micro_test.sql). Every raw row.
{{ fhir_micro_test_resources('int_fhir__mimic_iv_on_fhir__microbiologyevents', zone=on_fhir_zone()) }}
