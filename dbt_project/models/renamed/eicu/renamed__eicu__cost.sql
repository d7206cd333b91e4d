{{ config(alias='cost') }}
-- event_type names this profile's tables (condition, lab, treatment, prescription); unit_id comes
-- from the intermediate cost model (EHRSQL's eICU cost lacks the unit stay).
select
    costid as cost_id,
    patienthealthsystemstayid as hosp_id,
    patientunitstayid as unit_id,
    {{ renamed_table_name('eicu', 'eventtype') }} as event_type,
    eventid as event_id,
    chargetime as cost_time,
    cost as cost_amount
from {{ ref('int_ehrsql_eicu__eicu__cost') }}
order by cost_id
