-- Periodic vital signs of the cohort (empty on the demo, which ships no vitalPeriodic file);
-- shifted observationtime inside the time window.
with timed as (

    select
        vital.vitalperiodicid as source_vitalperiodicid,
        vital.patientunitstayid,
        cast(vital.temperature as double) as temperature,
        cast(vital.sao2 as integer) as sao2,
        cast(vital.heartrate as integer) as heartrate,
        cast(vital.respiration as integer) as respiration,
        cast(vital.systemicsystolic as integer) as systemicsystolic,
        cast(vital.systemicdiastolic as integer) as systemicdiastolic,
        cast(vital.systemicmean as integer) as systemicmean,
        {{ ehrsql_eicu_bounded(ehrsql_eicu_offset_time('cohort.unitadmittime', 'vital.observationoffset')) }} as observationtime,
        vital.observationoffset
    from {{ ref('stg_eicu__vitalperiodic') }} as vital
    inner join {{ ref('int_ehrsql_eicu__eicu__patient') }} as cohort using (patientunitstayid)

)

select
    cast(row_number() over (order by source_vitalperiodicid) - 1 as bigint) as vitalperiodicid,
    *
from timed
where observationtime is not null
