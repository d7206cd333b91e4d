-- Every admission (before the cohort is drawn), lower-cased, with its times moved by the patient's
-- offset (docs/benchmarks.md#ehrsql-2024-build-algorithm (steps 2-3)): a time after the current time becomes NULL; an admission whose
-- admittime does so is dropped; a NULL dischtime (a current admission) also nulls discharge_location.
with admissions as (

    select *, row_number() over () as file_row
    from {{ ref('stg_mimic_iv__admissions') }}

),

patients as (

    select subject_id, anchor_age, anchor_year from {{ ref('stg_mimic_iv__patients') }}

),

shifted as (

    select
        a.file_row,
        a.subject_id,
        a.hadm_id,
        a.admittime as original_admittime,
        a.dischtime as original_dischtime,
        {{ ehrsql2024_shift('a.admittime', 'o.offset_days') }} as admittime,
        {{ ehrsql2024_shift('a.dischtime', 'o.offset_days') }} as dischtime,
        {{ ehrsql2024_text('a.admission_type') }} as admission_type,
        {{ ehrsql2024_text('a.admission_location') }} as admission_location,
        {{ ehrsql2024_text('a.discharge_location') }} as discharge_location,
        {{ ehrsql2024_text('a.insurance') }} as insurance,
        {{ ehrsql2024_text('a.language') }} as language,
        {{ ehrsql2024_text('a.marital_status') }} as marital_status,
        year(a.admittime) - p.anchor_year + p.anchor_age as age
    from admissions as a
    left join patients as p on p.subject_id = a.subject_id
    left join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = a.subject_id

)

select
    file_row,
    subject_id,
    hadm_id,
    original_admittime,
    original_dischtime,
    admittime,
    dischtime,
    admission_type,
    admission_location,
    case when dischtime is not null then discharge_location end as discharge_location,
    insurance,
    language,
    marital_status,
    age,
    dischtime is null as is_current
from shifted
where admittime is not null
