{{ config(alias='admissions') }}
{{ fhir_agentbench_table('admissions') }}
