-- Allergies of the cohort; shifted allergytime inside the time window.
with timed as (

    select
        allergy.allergyid as source_allergyid,
        allergy.patientunitstayid,
        {{ ehrsql_eicu_text('allergy.drugname') }} as drugname,
        {{ ehrsql_eicu_text('allergy.allergyname') }} as allergyname,
        {{ ehrsql_eicu_bounded(ehrsql_eicu_offset_time('cohort.unitadmittime', 'allergy.allergyoffset')) }} as allergytime,
        allergy.allergyoffset
    from {{ ref('stg_eicu__allergy') }} as allergy
    inner join {{ ref('int_ehrsql_eicu__eicu__patient') }} as cohort using (patientunitstayid)

)

select
    cast(row_number() over (order by source_allergyid) - 1 as integer) as allergyid,
    *
from timed
where allergytime is not null
