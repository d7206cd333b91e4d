{{ config(alias='diagnoses_icd') }}
select
    row_id,
    subject_id,
    hadm_id,
    {{ ehrsql2024_icd_key('icd_version', 'icd_code') }} as icd_code,
    charttime
from ({{ mimic_iv_profile_rows('ehrsql2024', 'diagnoses_icd') }}) as numbered
order by row_id
