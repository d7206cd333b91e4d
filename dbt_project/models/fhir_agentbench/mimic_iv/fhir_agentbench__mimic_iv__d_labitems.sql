{{ config(alias='d_labitems') }}
{{ fhir_agentbench_table('d_labitems') }}
