{{ config(alias='labevents') }}
{{ fhir_agentbench_table('labevents') }}
