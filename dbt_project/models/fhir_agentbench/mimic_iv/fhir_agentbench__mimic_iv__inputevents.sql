{{ config(alias='inputevents') }}
{{ fhir_agentbench_table('inputevents') }}
