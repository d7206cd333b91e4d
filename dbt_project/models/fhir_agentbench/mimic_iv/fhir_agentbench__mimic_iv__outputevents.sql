{{ config(alias='outputevents') }}
{{ fhir_agentbench_table('outputevents') }}
