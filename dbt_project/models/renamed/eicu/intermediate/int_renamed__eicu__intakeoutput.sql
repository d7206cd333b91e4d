-- Intake/output rows of EHR-ChatQA's eICU database. The published label rule, on the whole staged table: keep rows
-- whose celllabel occurs on some row with an 'intake (ml)' or 'output (ml)' cellpath, drop the labels 'intake' and
-- 'output', then strip a trailing word 'intake', then a trailing word 'output'. intakeoutputtime up to the current
-- time (no lower bound); ids renumbered 0..n-1 in intakeOutput.csv's row order.
with source as (

    select
        file_row,
        intakeoutputid as source_intakeoutputid,
        patientunitstayid,
        intakeoutputoffset,
        {{ ehrsql_eicu_text('cellpath') }} as cellpath,
        {{ ehrsql_eicu_text('celllabel') }} as source_celllabel,
        cellvaluenumeric
    from ({{ renamed_eicu_file_rows('stg_eicu__intakeoutput') }}) as intakeoutput

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
        {{ renamed_eicu_event_time('stays.unitadmittime', 'labelled.intakeoutputoffset') }} as intakeoutputtime
    from labelled
    inner join {{ ref('int_renamed__eicu__patient') }} as stays using (patientunitstayid)

)

select
    cast(row_number() over (order by file_row) - 1 as integer) as intakeoutputid,
    source_intakeoutputid,
    file_row,
    patientunitstayid,
    cellpath,
    celllabel,
    cellvaluenumeric,
    intakeoutputtime,
    source_celllabel,
    intakeoutputoffset
from timed
where intakeoutputtime is not null
