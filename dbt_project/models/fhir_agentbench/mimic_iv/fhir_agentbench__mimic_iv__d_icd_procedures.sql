{{ config(alias='d_icd_procedures') }}
{{ fhir_agentbench_table('d_icd_procedures') }}
