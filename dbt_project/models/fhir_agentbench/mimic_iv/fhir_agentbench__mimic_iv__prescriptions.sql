{{ config(alias='prescriptions') }}
{{ fhir_agentbench_table('prescriptions', raw_columns=['drug', 'drug_type', 'formulary_drug_cd']) }}
