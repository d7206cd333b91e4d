{{ config(alias='cost') }}
-- One row per diagnosis, lab, procedure and prescription event (in that block order, row_id continuing
-- across blocks); chargetime = the event time (prescriptions: starttime); cost per key from the draws.
with events as (

    select 1 as block, row_id as event_id, subject_id, hadm_id, 'diagnoses_icd' as event_type,
           charttime as chargetime, icd_code as cost_key
    from {{ ref('ehrsql2024__mimic_iv__diagnoses_icd') }}
    union all
    select 2, row_id, subject_id, hadm_id, 'labevents', charttime, cast(itemid as varchar)
    from {{ ref('ehrsql2024__mimic_iv__labevents') }}
    union all
    select 3, row_id, subject_id, hadm_id, 'procedures_icd', charttime, icd_code
    from {{ ref('ehrsql2024__mimic_iv__procedures_icd') }}
    union all
    select 4, row_id, subject_id, hadm_id, 'prescriptions', starttime, drug
    from {{ ref('ehrsql2024__mimic_iv__prescriptions') }}

)

select
    row_number() over (order by e.block, e.event_id) - 1 as row_id,
    e.subject_id,
    e.hadm_id,
    e.event_type,
    e.event_id,
    e.chargetime,
    d.cost
from events as e
inner join {{ ref('int_ehrsql2024__mimic_iv__cost_draws') }} as d
    on d.event_type = e.event_type and d.cost_key = e.cost_key
order by row_id
