{{ config(alias='microbiologyevents') }}
select
    row_id,
    subject_id,
    hadm_id,
    charttime,
    spec_type_desc,
    test_name,
    org_name
from ({{ mimic_iv_profile_rows('ehrsql2024', 'microbiologyevents') }}) as numbered
order by row_id
