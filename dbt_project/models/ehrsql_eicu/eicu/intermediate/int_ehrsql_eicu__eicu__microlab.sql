-- Microbiology cultures of the cohort; shifted culturetakentime inside the time window.
with timed as (

    select
        microlab.microlabid as source_microlabid,
        microlab.patientunitstayid,
        {{ ehrsql_eicu_text('microlab.culturesite') }} as culturesite,
        {{ ehrsql_eicu_text('microlab.organism') }} as organism,
        {{ ehrsql_eicu_bounded(ehrsql_eicu_offset_time('cohort.unitadmittime', 'microlab.culturetakenoffset')) }} as culturetakentime,
        microlab.culturetakenoffset
    from {{ ref('stg_eicu__microlab') }} as microlab
    inner join {{ ref('int_ehrsql_eicu__eicu__patient') }} as cohort using (patientunitstayid)

)

select
    cast(row_number() over (order by source_microlabid) - 1 as integer) as microlabid,
    *
from timed
where culturetakentime is not null
