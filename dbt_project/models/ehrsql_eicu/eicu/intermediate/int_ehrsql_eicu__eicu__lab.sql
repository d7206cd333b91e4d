-- Lab results of the cohort with a numeric labresult; shifted labresulttime inside the time window.
with timed as (

    select
        lab.labid as source_labid,
        lab.patientunitstayid,
        {{ ehrsql_eicu_text('lab.labname') }} as labname,
        lab.labresult,
        {{ ehrsql_eicu_bounded(ehrsql_eicu_offset_time('cohort.unitadmittime', 'lab.labresultoffset')) }} as labresulttime,
        lab.labresultoffset
    from {{ ref('stg_eicu__lab') }} as lab
    inner join {{ ref('int_ehrsql_eicu__eicu__patient') }} as cohort using (patientunitstayid)
    where lab.labresult is not null

)

select
    cast(row_number() over (order by source_labid) - 1 as integer) as labid,
    *
from timed
where labresulttime is not null
