{{ config(alias='outputevents') }}
select
    row_id,
    subject_id,
    hadm_id,
    stay_id,
    charttime,
    itemid,
    value,
    valueuom
from ({{ mimic_iv_profile_rows('ehrsql2024', 'outputevents') }}) as numbered
order by row_id
