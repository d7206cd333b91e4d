{{ config(alias='icu_stays') }}
select
    i.stay_id,
    i.subject_id as patient_id,
    i.hadm_id as admission_id,
    i.first_careunit as first_care_unit,
    i.last_careunit as last_care_unit,
    i.intime + to_days(s.offset_days) as in_time,
    i.outtime + to_days(s.offset_days) as out_time
from {{ ref('stg_mimic_iv__icustays') }} as i
inner join {{ ref('int_dq__mimic_iv__scope') }} as s using (subject_id)
