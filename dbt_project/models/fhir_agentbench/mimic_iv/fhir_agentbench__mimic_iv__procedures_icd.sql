{{ config(alias='procedures_icd') }}
-- FHIR-AgentBench's procedures_icd.charttime: the chart date at midnight
{{ fhir_agentbench_table('procedures_icd', raw_columns=['icd_code'],
                         extra_columns=['cast(chartdate as timestamp) as charttime']) }}
