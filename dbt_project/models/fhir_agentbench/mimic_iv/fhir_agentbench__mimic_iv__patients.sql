{{ config(alias='patients') }}
{{ fhir_agentbench_table('patients') }}
