{{ config(alias='condition') }}
-- One Condition per diagnoses_icd row (kind-lab/mimic-fhir sql/fhir_condition.sql).
{{ fhir_icd_event_resources('Condition', 'int_fhir__mimic_iv_on_fhir__diagnoses_icd', 'stg_mimic_iv__d_icd_diagnoses',
                            'mimic-diagnosis-icd', profile='mimic-condition', zone=on_fhir_zone()) }}
