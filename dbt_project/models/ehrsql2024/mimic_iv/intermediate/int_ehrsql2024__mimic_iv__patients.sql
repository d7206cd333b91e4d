-- Cohort patients (source order = file_row; source_key = the MIMIC-IV key, for lineage).
-- dob = Jan 1 of (anchor_year - anchor_age) + 197 days (the original's fixed "random" day), both dob
-- and dod moved by the patient's offset; a dob after the current time (or a patient without
-- admissions) drops the patient, a dod after it becomes NULL.
with patients as (

    select *, row_number() over () as file_row
    from {{ ref('stg_mimic_iv__patients') }}

),

shifted as (

    select
        p.file_row,
        p.subject_id,
        {{ mimic_iv_source_key(subject_id='p.subject_id') }} as source_key,
        {{ ehrsql2024_text('p.gender') }} as gender,
        {{ ehrsql2024_shift("make_date(p.anchor_year - p.anchor_age, 1, 1) + interval 197 day", 'o.offset_days') }} as dob,
        {{ ehrsql2024_shift('p.dod', 'o.offset_days') }} as dod
    from patients as p
    inner join {{ ref('int_ehrsql2024__mimic_iv__cohort') }} as c on c.subject_id = p.subject_id
    left join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = p.subject_id

)

select
    file_row,
    source_key,
    subject_id,
    {{ ehrsql2024_loaded('gender') }} as gender,
    dob,
    dod
from shifted
where dob is not null
