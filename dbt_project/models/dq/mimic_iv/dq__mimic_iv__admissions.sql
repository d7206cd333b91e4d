{{ config(alias='admissions') }}
-- Hospital admissions of the patients in scope; age at admission as MIMIC-IV defines it (anchor age plus the years
-- since the anchor year).
select
    a.hadm_id as admission_id,
    a.subject_id as patient_id,
    a.admittime + to_days(s.offset_days) as admit_time,
    a.dischtime + to_days(s.offset_days) as discharge_time,
    a.admission_type,
    a.admission_location,
    a.discharge_location,
    a.insurance,
    a.marital_status,
    year(a.admittime) - p.anchor_year + p.anchor_age as age_at_admission
from {{ ref('stg_mimic_iv__admissions') }} as a
inner join {{ ref('int_dq__mimic_iv__scope') }} as s using (subject_id)
inner join {{ ref('stg_mimic_iv__patients') }} as p using (subject_id)
