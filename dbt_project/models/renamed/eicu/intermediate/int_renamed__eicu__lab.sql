-- Lab results of EHR-ChatQA's eICU database with a numeric labresult; labresulttime up to the current time (no lower
-- bound); ids renumbered 0..n-1 in lab.csv's row order.
with timed as (

    select
        lab.file_row,
        lab.labid as source_labid,
        lab.patientunitstayid,
        {{ ehrsql_eicu_text('lab.labname') }} as labname,
        lab.labresult,
        {{ renamed_eicu_event_time('stays.unitadmittime', 'lab.labresultoffset') }} as labresulttime,
        lab.labresultoffset
    from ({{ renamed_eicu_file_rows('stg_eicu__lab') }}) as lab
    inner join {{ ref('int_renamed__eicu__patient') }} as stays using (patientunitstayid)
    where lab.labresult is not null

)

select
    cast(row_number() over (order by file_row) - 1 as integer) as labid,
    *
from timed
where labresulttime is not null
