{{ config(alias='d_icd_diagnoses') }}
{{ fhir_agentbench_table('d_icd_diagnoses') }}
