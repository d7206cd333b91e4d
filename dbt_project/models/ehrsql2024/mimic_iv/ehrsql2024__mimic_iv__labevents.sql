{{ config(alias='labevents') }}
select
    row_id,
    subject_id,
    hadm_id,
    itemid,
    charttime,
    valuenum,
    valueuom
from ({{ mimic_iv_profile_rows('ehrsql2024', 'labevents') }}) as numbered
order by row_id
