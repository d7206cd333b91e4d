{{ config(alias='chartevents') }}
{{ fhir_agentbench_table('chartevents', raw_columns=['value']) }}
