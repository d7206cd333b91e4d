{{ config(alias='d_items') }}
{{ fhir_agentbench_table('d_items') }}
