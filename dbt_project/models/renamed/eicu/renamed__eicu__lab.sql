{{ config(alias='lab') }}
select
    labid as lab_id,
    patientunitstayid as unit_id,
    labname as lab_name,
    labresult as lab_result,
    labresulttime as lab_result_time
from {{ ref('int_renamed__eicu__lab') }}
order by lab_id
