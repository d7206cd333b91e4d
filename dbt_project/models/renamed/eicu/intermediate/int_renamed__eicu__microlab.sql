-- Microbiology cultures of EHR-ChatQA's eICU database; culturetakentime up to the current time (no lower bound);
-- ids renumbered 0..n-1 in microLab.csv's row order.
with timed as (

    select
        microlab.file_row,
        microlab.microlabid as source_microlabid,
        microlab.patientunitstayid,
        {{ ehrsql_eicu_text('microlab.culturesite') }} as culturesite,
        {{ ehrsql_eicu_text('microlab.organism') }} as organism,
        {{ renamed_eicu_event_time('stays.unitadmittime', 'microlab.culturetakenoffset') }} as culturetakentime,
        microlab.culturetakenoffset
    from ({{ renamed_eicu_file_rows('stg_eicu__microlab') }}) as microlab
    inner join {{ ref('int_renamed__eicu__patient') }} as stays using (patientunitstayid)

)

select
    cast(row_number() over (order by file_row) - 1 as integer) as microlabid,
    *
from timed
where culturetakentime is not null
