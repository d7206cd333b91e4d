{{ config(alias='transfers') }}
select
    row_id,
    subject_id,
    hadm_id,
    transfer_id,
    eventtype,
    careunit,
    intime,
    outtime
from ({{ mimic_iv_profile_rows('ehrsql2024', 'transfers') }}) as numbered
order by row_id
