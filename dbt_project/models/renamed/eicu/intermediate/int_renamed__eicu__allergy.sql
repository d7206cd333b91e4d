-- Allergies of EHR-ChatQA's eICU database; allergytime up to the current time (no lower bound); ids renumbered
-- 0..n-1 in allergy.csv's row order.
with timed as (

    select
        allergy.file_row,
        allergy.allergyid as source_allergyid,
        allergy.patientunitstayid,
        {{ ehrsql_eicu_text('allergy.drugname') }} as drugname,
        {{ ehrsql_eicu_text('allergy.allergyname') }} as allergyname,
        {{ renamed_eicu_event_time('stays.unitadmittime', 'allergy.allergyoffset') }} as allergytime,
        allergy.allergyoffset
    from ({{ renamed_eicu_file_rows('stg_eicu__allergy') }}) as allergy
    inner join {{ ref('int_renamed__eicu__patient') }} as stays using (patientunitstayid)

)

select
    cast(row_number() over (order by file_row) - 1 as integer) as allergyid,
    *
from timed
where allergytime is not null
