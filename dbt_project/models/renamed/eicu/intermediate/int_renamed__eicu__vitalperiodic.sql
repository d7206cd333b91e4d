-- Periodic vital signs of EHR-ChatQA's eICU database (empty on the demo, which ships no vitalPeriodic file);
-- observationtime up to the current time (no lower bound); ids renumbered 0..n-1 in vitalPeriodic.csv's row order.
with timed as (

    select
        vital.file_row,
        vital.vitalperiodicid as source_vitalperiodicid,
        vital.patientunitstayid,
        cast(vital.temperature as double) as temperature,
        cast(vital.sao2 as integer) as sao2,
        cast(vital.heartrate as integer) as heartrate,
        cast(vital.respiration as integer) as respiration,
        cast(vital.systemicsystolic as integer) as systemicsystolic,
        cast(vital.systemicdiastolic as integer) as systemicdiastolic,
        cast(vital.systemicmean as integer) as systemicmean,
        {{ renamed_eicu_event_time('stays.unitadmittime', 'vital.observationoffset') }} as observationtime,
        vital.observationoffset
    from ({{ renamed_eicu_file_rows('stg_eicu__vitalperiodic') }}) as vital
    inner join {{ ref('int_renamed__eicu__patient') }} as stays using (patientunitstayid)

)

select
    cast(row_number() over (order by file_row) - 1 as bigint) as vitalperiodicid,
    *
from timed
where observationtime is not null
