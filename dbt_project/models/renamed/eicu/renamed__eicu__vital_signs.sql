{{ config(alias='vital_signs') }}
select
    vitalperiodicid as vital_sign_id,
    patientunitstayid as unit_id,
    temperature,
    sao2,
    heartrate as heart_rate,
    respiration as respiration_rate,
    systemicsystolic as systolic_bp,
    systemicdiastolic as diastolic_bp,
    systemicmean as mean_bp,
    observationtime as vital_time
from {{ ref('int_renamed__eicu__vitalperiodic') }}
order by vital_sign_id
