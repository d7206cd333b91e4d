-- Treatments of the cohort: same path rule as diagnoses (levels 3–4 named, most common levels
-- 1–2 kept), shifted treatmenttime inside the time window, ids renumbered in source-id order.
with source as (

    select
        treatmentid as source_treatmentid,
        patientunitstayid,
        treatmentoffset,
        {{ ehrsql_eicu_text('treatmentstring') }} as treatmentstring
    from {{ ref('stg_eicu__treatment') }}
    where treatmentstring is not null

),

named as (

    {{ ehrsql_eicu_named_paths('source', 'source_treatmentid', 'treatmentstring') }}

),

timed as (

    select
        named.*,
        {{ ehrsql_eicu_bounded(ehrsql_eicu_offset_time('cohort.unitadmittime', 'named.treatmentoffset')) }} as treatmenttime
    from named
    inner join {{ ref('int_ehrsql_eicu__eicu__patient') }} as cohort using (patientunitstayid)

)

select
    cast(row_number() over (order by source_treatmentid) - 1 as integer) as treatmentid,
    source_treatmentid,
    patientunitstayid,
    name as treatmentname,
    treatmenttime,
    treatmentstring,
    treatmentoffset
from timed
where treatmenttime is not null
