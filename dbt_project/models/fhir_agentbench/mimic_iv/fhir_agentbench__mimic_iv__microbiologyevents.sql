{{ config(alias='microbiologyevents') }}
{{ fhir_agentbench_table('microbiologyevents') }}
