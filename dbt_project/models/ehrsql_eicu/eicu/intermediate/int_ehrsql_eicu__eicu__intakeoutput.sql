-- Intake/output rows of the cohort. Published label rule, on the whole staged table: keep rows whose
-- celllabel occurs on some row with an 'intake (ml)' or 'output (ml)' cellpath, drop the labels
-- 'intake' and 'output', then strip a trailing word 'intake', then a trailing word 'output'.
with source as (

    select
        intakeoutputid as source_intakeoutputid,
        patientunitstayid,
        intakeoutputoffset,
        {{ ehrsql_eicu_text('cellpath') }} as cellpath,
        {{ ehrsql_eicu_text('celllabel') }} as source_celllabel,
        cellvaluenumeric
    from {{ ref('stg_eicu__intakeoutput') }}

),

volume_labels as (

    select distinct source_celllabel
    from source
    where contains(cellpath, 'intake (ml)') or contains(cellpath, 'output (ml)')

),

labelled as (

    select
        *,
        {{ ehrsql_eicu_drop_last_word(ehrsql_eicu_drop_last_word('source_celllabel', 'intake'), 'output') }} as celllabel
    from source
    where source_celllabel in (select source_celllabel from volume_labels)
      and source_celllabel not in ('intake', 'output')

),

timed as (

    select
        labelled.*,
        {{ ehrsql_eicu_bounded(ehrsql_eicu_offset_time('cohort.unitadmittime', 'labelled.intakeoutputoffset')) }} as intakeoutputtime
    from labelled
    inner join {{ ref('int_ehrsql_eicu__eicu__patient') }} as cohort using (patientunitstayid)

)

select
    cast(row_number() over (order by source_intakeoutputid) - 1 as integer) as intakeoutputid,
    source_intakeoutputid,
    patientunitstayid,
    cellpath,
    celllabel,
    cellvaluenumeric,
    intakeoutputtime,
    source_celllabel,
    intakeoutputoffset
from timed
where intakeoutputtime is not null
