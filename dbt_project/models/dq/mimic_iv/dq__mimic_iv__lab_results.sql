{{ config(alias='lab_results') }}
-- Numeric lab results of the patients in scope, with the lab's own unit, reference range, flag and priority.
select
    l.subject_id as patient_id,
    l.hadm_id as admission_id,
    l.itemid as test_code,
    l.charttime + to_days(s.offset_days) as charted_at,
    l.valuenum as value,
    l.valueuom as unit,
    l.ref_range_lower as ref_low,
    l.ref_range_upper as ref_high,
    l.flag,
    l.priority
from {{ ref('stg_mimic_iv__labevents') }} as l
inner join {{ ref('int_dq__mimic_iv__scope') }} as s using (subject_id)
where l.valuenum is not null
