{{ config(alias='chart_observations') }}
-- Numeric bedside observations (vital signs and point-of-care labs) of the ICU stays of the patients in scope.
select
    c.subject_id as patient_id,
    c.hadm_id as admission_id,
    c.stay_id,
    c.itemid as item_code,
    c.charttime + to_days(s.offset_days) as charted_at,
    c.valuenum as value,
    c.valueuom as unit
from {{ ref('stg_mimic_iv__chartevents') }} as c
inner join {{ ref('int_dq__mimic_iv__scope') }} as s using (subject_id)
where c.valuenum is not null
  and c.itemid in (select item_code from {{ ref('dq__mimic_iv__chart_items') }})
