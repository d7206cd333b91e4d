-- Diagnoses of EHR-ChatQA's eICU database: the path rule over the whole staged table (before the cohort filter, as
-- published; ties of the most common levels 1-2 go to the one seen first in diagnosis.csv), diagnosistime up to the
-- current time (no lower bound), ids renumbered 0..n-1 in the file's row order. source_diagnosisid and file_row
-- keep the lineage.
with source as (

    select
        file_row,
        diagnosisid as source_diagnosisid,
        patientunitstayid,
        diagnosisoffset,
        {{ ehrsql_eicu_text('diagnosisstring') }} as diagnosisstring,
        {{ ehrsql_eicu_text('icd9code') }} as icd9code
    from ({{ renamed_eicu_file_rows('stg_eicu__diagnosis') }}) as diagnosis
    where diagnosisstring is not null

),

named as (

    {{ ehrsql_eicu_named_paths('source', 'file_row', 'diagnosisstring') }}

),

timed as (

    select
        named.*,
        {{ renamed_eicu_event_time('stays.unitadmittime', 'named.diagnosisoffset') }} as diagnosistime
    from named
    inner join {{ ref('int_renamed__eicu__patient') }} as stays using (patientunitstayid)

)

select
    cast(row_number() over (order by file_row) - 1 as integer) as diagnosisid,
    source_diagnosisid,
    file_row,
    patientunitstayid,
    name as diagnosisname,
    diagnosistime,
    icd9code,
    diagnosisstring,
    diagnosisoffset
from timed
where diagnosistime is not null
