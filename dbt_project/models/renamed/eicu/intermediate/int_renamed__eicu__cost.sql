-- Cost of EHR-ChatQA's eICU database: one row per diagnosis, lab, treatment and medication event (blocks in that
-- order, costid 0..n-1 continuing across the blocks, each block in its renumbered id order, i.e. its file's row
-- order); chargetime = the event time (medication: drugstarttime); cost per event name from
-- int_renamed__eicu__cost_amounts. EHR-ChatQA's cost carries the unit stay (patientunitstayid).
with events as (

    select 1 as block, 'diagnosis' as eventtype, diagnosisid as eventid, patientunitstayid,
           diagnosisname as cost_key, diagnosistime as chargetime
    from {{ ref('int_renamed__eicu__diagnosis') }}
    union all
    select 2, 'lab', labid, patientunitstayid, labname, labresulttime
    from {{ ref('int_renamed__eicu__lab') }}
    union all
    select 3, 'treatment', treatmentid, patientunitstayid, treatmentname, treatmenttime
    from {{ ref('int_renamed__eicu__treatment') }}
    union all
    select 4, 'medication', medicationid, patientunitstayid, drugname, drugstarttime
    from {{ ref('int_renamed__eicu__medication') }}

)

select
    cast(row_number() over (order by events.block, events.eventid) - 1 as integer) as costid,
    stays.uniquepid,
    stays.patienthealthsystemstayid,
    events.patientunitstayid,
    events.eventtype,
    events.eventid,
    events.chargetime,
    amounts.cost,
    events.cost_key
from events
inner join {{ ref('int_renamed__eicu__patient') }} as stays using (patientunitstayid)
inner join {{ ref('int_renamed__eicu__cost_amounts') }} as amounts
    on amounts.eventtype = events.eventtype
   and amounts.cost_key = events.cost_key
