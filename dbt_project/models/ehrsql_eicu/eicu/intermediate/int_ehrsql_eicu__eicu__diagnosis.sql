-- Diagnoses of the cohort: path rule over the whole staged table (before the cohort filter, as
-- published), shifted diagnosistime kept inside [start_year-01-01, current_time], ids renumbered
-- 0..n-1 in source-id order. source_diagnosisid keeps the lineage.
with source as (

    select
        diagnosisid as source_diagnosisid,
        patientunitstayid,
        diagnosisoffset,
        {{ ehrsql_eicu_text('diagnosisstring') }} as diagnosisstring,
        {{ ehrsql_eicu_text('icd9code') }} as icd9code
    from {{ ref('stg_eicu__diagnosis') }}
    where diagnosisstring is not null

),

named as (

    {{ ehrsql_eicu_named_paths('source', 'source_diagnosisid', 'diagnosisstring') }}

),

timed as (

    select
        named.*,
        {{ ehrsql_eicu_bounded(ehrsql_eicu_offset_time('cohort.unitadmittime', 'named.diagnosisoffset')) }} as diagnosistime
    from named
    inner join {{ ref('int_ehrsql_eicu__eicu__patient') }} as cohort using (patientunitstayid)

)

select
    cast(row_number() over (order by source_diagnosisid) - 1 as integer) as diagnosisid,
    source_diagnosisid,
    patientunitstayid,
    name as diagnosisname,
    diagnosistime,
    icd9code,
    diagnosisstring,
    diagnosisoffset
from timed
where diagnosistime is not null
