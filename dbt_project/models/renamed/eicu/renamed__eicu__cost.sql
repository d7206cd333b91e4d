{{ config(alias='cost') }}
-- event_type names this profile's tables (condition, lab, treatment, prescription); EHR-ChatQA's cost carries the
-- unit stay (unit_id), which EHRSQL's eICU cost lacks.
select
    costid as cost_id,
    patienthealthsystemstayid as hosp_id,
    patientunitstayid as unit_id,
    {{ renamed_table_name('eicu', 'eventtype') }} as event_type,
    eventid as event_id,
    chargetime as cost_time,
    cost as cost_amount
from {{ ref('int_renamed__eicu__cost') }}
order by cost_id
