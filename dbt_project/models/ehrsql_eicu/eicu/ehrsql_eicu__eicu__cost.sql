{{ config(alias='cost') }}
-- EHRSQL eICU `cost` (published columns; patientunitstayid stays in the intermediate model).

select
    costid,
    uniquepid,
    patienthealthsystemstayid,
    eventtype,
    eventid,
    chargetime,
    cost
from {{ ref('int_ehrsql_eicu__eicu__cost') }}
order by costid
