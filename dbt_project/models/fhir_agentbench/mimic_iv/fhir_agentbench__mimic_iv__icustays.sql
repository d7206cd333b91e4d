{{ config(alias='icustays') }}
{{ fhir_agentbench_table('icustays') }}
