{{ config(alias='inputevents') }}
select
    row_id,
    subject_id,
    hadm_id,
    stay_id,
    starttime,
    itemid,
    totalamount,
    totalamountuom
from ({{ mimic_iv_profile_rows('ehrsql2024', 'inputevents') }}) as numbered
order by row_id
