{{ config(alias='observation_micro_org') }}
-- One Observation per organism test_itemid-micro_specimen_id-org_itemid grown (sql/fhir_observation_micro_org.sql). Every raw row.
{{ fhir_micro_org_resources('int_fhir__mimic_iv_on_fhir__microbiologyevents', zone=on_fhir_zone()) }}
