{{ config(alias='observation_micro_susc') }}
-- One Observation per microbiologyevents row with an antibiotic (sql/fhir_observation_micro_susc.sql). Every raw row.
{{ fhir_micro_susc_resources('int_fhir__mimic_iv_on_fhir__microbiologyevents', zone=on_fhir_zone()) }}
