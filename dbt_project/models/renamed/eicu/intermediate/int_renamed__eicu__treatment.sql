-- Treatments of EHR-ChatQA's eICU database: the diagnoses' path rule (levels 3-4 named, the most common levels 1-2
-- kept, ties to the first seen in treatment.csv), treatmenttime up to the current time (no lower bound), ids
-- renumbered 0..n-1 in the file's row order.
with source as (

    select
        file_row,
        treatmentid as source_treatmentid,
        patientunitstayid,
        treatmentoffset,
        {{ ehrsql_eicu_text('treatmentstring') }} as treatmentstring
    from ({{ renamed_eicu_file_rows('stg_eicu__treatment') }}) as treatment
    where treatmentstring is not null

),

named as (

    {{ ehrsql_eicu_named_paths('source', 'file_row', 'treatmentstring') }}

),

timed as (

    select
        named.*,
        {{ renamed_eicu_event_time('stays.unitadmittime', 'named.treatmentoffset') }} as treatmenttime
    from named
    inner join {{ ref('int_renamed__eicu__patient') }} as stays using (patientunitstayid)

)

select
    cast(row_number() over (order by file_row) - 1 as integer) as treatmentid,
    source_treatmentid,
    file_row,
    patientunitstayid,
    name as treatmentname,
    treatmenttime,
    treatmentstring,
    treatmentoffset
from timed
where treatmenttime is not null
