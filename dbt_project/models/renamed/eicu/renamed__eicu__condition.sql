{{ config(alias='condition') }}
select
    diagnosisid as condition_id,
    patientunitstayid as unit_id,
    diagnosisname as condition_name,
    diagnosistime as condition_time,
    icd9code as icd9_code
from {{ ref('int_renamed__eicu__diagnosis') }}
order by condition_id
