{{ config(alias='diagnoses_icd') }}
-- FHIR-AgentBench's diagnoses_icd.charttime: the admission's admittime (its pipeline drops the questions reading it)
select diagnoses.*, admissions.admittime as charttime
from ({{ fhir_agentbench_table('diagnoses_icd', raw_columns=['icd_code']) }}) as diagnoses
left join {{ source('mimic_iv', 'admissions') }} as admissions using (hadm_id)
order by diagnoses.row_id
