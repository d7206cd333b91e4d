{{ config(alias='diagnosiscodes') }}
select
    row_id as recordid,
    icd_code as icdcode,
    icd_version as codeversion,
    long_title as description
from ({{ mimic_iv_profile_rows('renamed', 'd_icd_diagnoses') }}) as numbered
order by recordid
