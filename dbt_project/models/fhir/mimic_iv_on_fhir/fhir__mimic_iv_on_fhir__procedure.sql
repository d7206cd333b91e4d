{{ config(alias='procedure') }}
-- One Procedure per procedures_icd row (kind-lab/mimic-fhir sql/fhir_procedure.sql), performed at the chart date's
-- midnight.
{{ fhir_icd_event_resources('Procedure', 'int_fhir__mimic_iv_on_fhir__procedures_icd', 'stg_mimic_iv__d_icd_procedures',
                            'mimic-procedure-icd', profile='mimic-procedure', zone=on_fhir_zone()) }}
