{{ config(alias='transfers') }}
{{ fhir_agentbench_table('transfers', raw_columns=['careunit']) }}
