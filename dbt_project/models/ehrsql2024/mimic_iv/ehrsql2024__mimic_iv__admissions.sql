{{ config(alias='admissions') }}
select
    row_id,
    subject_id,
    hadm_id,
    admittime,
    dischtime,
    admission_type,
    admission_location,
    discharge_location,
    insurance,
    language,
    marital_status,
    age
from ({{ mimic_iv_profile_rows('ehrsql2024', 'admissions') }}) as numbered
order by row_id
