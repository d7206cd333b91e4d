{{ config(alias='icustays') }}
select
    row_id,
    subject_id,
    hadm_id,
    stay_id,
    first_careunit,
    last_careunit,
    intime,
    outtime
from ({{ mimic_iv_profile_rows('ehrsql2024', 'icustays') }}) as numbered
order by row_id
