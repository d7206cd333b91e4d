{{ config(alias='patients') }}
-- Patients of the audit extract. Birth date from MIMIC-IV's anchor (anchor_year - anchor_age) on a seeded day of that
-- year; times moved by the patient's offset like every table of the extract.
select
    p.subject_id as patient_id,
    upper(p.gender) as sex,
    cast(make_date(p.anchor_year - p.anchor_age, 1, 1) + to_days(s.birth_day + s.offset_days) as date) as birth_date,
    cast(p.dod + to_days(s.offset_days) as date) as death_date
from {{ ref('stg_mimic_iv__patients') }} as p
inner join {{ ref('int_dq__mimic_iv__scope') }} as s using (subject_id)
