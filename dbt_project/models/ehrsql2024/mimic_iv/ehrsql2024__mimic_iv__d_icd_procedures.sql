{{ config(alias='d_icd_procedures') }}
select
    row_id,
    {{ ehrsql2024_icd_key('icd_version', 'icd_code') }} as icd_code,
    long_title
from ({{ mimic_iv_profile_rows('ehrsql2024', 'd_icd_procedures') }}) as numbered
order by row_id
