{{ config(alias='patients') }}
select
    row_id,
    subject_id,
    gender,
    dob,
    dod
from ({{ mimic_iv_profile_rows('ehrsql2024', 'patients') }}) as numbered
order by row_id
