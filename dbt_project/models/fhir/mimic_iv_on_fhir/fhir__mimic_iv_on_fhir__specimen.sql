{{ config(alias='specimen') }}
-- One Specimen per micro_specimen_id (kind-lab/mimic-fhir sql/fhir_specimen.sql). Every raw row.
{{ fhir_micro_specimen_resources('int_fhir__mimic_iv_on_fhir__microbiologyevents', zone=on_fhir_zone()) }}
