{{ config(alias='chartevents') }}
select
    row_id,
    subject_id,
    hadm_id,
    stay_id,
    itemid,
    charttime,
    valuenum,
    valueuom
from ({{ mimic_iv_profile_rows('ehrsql2024', 'chartevents') }}) as numbered
order by row_id
