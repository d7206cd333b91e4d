{{ config(alias='treatment') }}
select
    treatmentid as treatment_id,
    patientunitstayid as unit_id,
    treatmentname as treatment_name,
    treatmenttime as treatment_time
from {{ ref('int_renamed__eicu__treatment') }}
order by treatment_id
