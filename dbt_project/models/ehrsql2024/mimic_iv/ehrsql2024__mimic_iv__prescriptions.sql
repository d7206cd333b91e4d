{{ config(alias='prescriptions') }}
select
    row_id,
    subject_id,
    hadm_id,
    starttime,
    stoptime,
    drug,
    dose_val_rx,
    dose_unit_rx,
    route
from ({{ mimic_iv_profile_rows('ehrsql2024', 'prescriptions') }}) as numbered
order by row_id
