{{ config(alias='medication_orders') }}
select
    m.subject_id as patient_id,
    m.hadm_id as admission_id,
    m.starttime + to_days(s.offset_days) as start_time,
    m.stoptime + to_days(s.offset_days) as stop_time,
    m.drug_type,
    m.drug,
    m.prod_strength as product_strength,
    m.dose_val_rx as dose,
    m.dose_unit_rx as dose_unit,
    m.route
from {{ ref('stg_mimic_iv__prescriptions') }} as m
inner join {{ ref('int_dq__mimic_iv__scope') }} as s using (subject_id)
