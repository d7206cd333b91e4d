{{ config(alias='admissions') }}
-- Admissions of the cohort patients (times already shifted in int_ehrsql2024__mimic_iv__admissions_shifted);
-- age = year(original admittime) - anchor_year + anchor_age.
select
    row_number() over (order by a.file_row) - 1 as row_id,
    a.subject_id,
    a.hadm_id,
    a.admittime,
    a.dischtime,
    {{ ehrsql2024_loaded('a.admission_type') }} as admission_type,
    {{ ehrsql2024_loaded('a.admission_location') }} as admission_location,
    {{ ehrsql2024_loaded('a.discharge_location') }} as discharge_location,
    {{ ehrsql2024_loaded('a.insurance') }} as insurance,
    {{ ehrsql2024_loaded('a.language') }} as language,
    {{ ehrsql2024_loaded('a.marital_status') }} as marital_status,
    a.age
from {{ ref('int_ehrsql2024__mimic_iv__admissions_shifted') }} as a
inner join {{ ref('int_ehrsql2024__mimic_iv__cohort') }} as c on c.subject_id = a.subject_id
order by row_id
