-- Admissions of the cohort patients (times already shifted in int_ehrsql2024__mimic_iv__admissions_shifted);
-- age = year(original admittime) - anchor_year + anchor_age.
select
    a.file_row,
    {{ mimic_iv_source_key(hadm_id='a.hadm_id') }} as source_key,
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
