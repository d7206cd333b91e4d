{{ config(alias='condition') }}
{{ fhir_icd_event_resources('Condition', 'int_ehrsql2024__mimic_iv__diagnoses_icd', 'stg_mimic_iv__d_icd_diagnoses',
                            'mimic-diagnosis-icd') }}
