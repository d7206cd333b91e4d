{{ config(alias='procedure') }}
{{ fhir_icd_event_resources('Procedure', 'int_ehrsql2024__mimic_iv__procedures_icd', 'stg_mimic_iv__d_icd_procedures',
                            'mimic-procedure-icd') }}
