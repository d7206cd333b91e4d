{{ config(alias='vitalperiodic') }}
-- EHRSQL eICU `vitalperiodic` (columns and order as the published eicu.sql).

select
    vitalperiodicid,
    patientunitstayid,
    temperature,
    sao2,
    heartrate,
    respiration,
    systemicsystolic,
    systemicdiastolic,
    systemicmean,
    observationtime
from {{ ref('int_ehrsql_eicu__eicu__vitalperiodic') }}
order by vitalperiodicid
