{{ config(alias='demographics') }}
select
    row_id as recordid,
    subject_id as patientid,
    gender,
    dob as dateofbirth,
    dod as dateofdeath
from ({{ mimic_iv_profile_rows('renamed', 'patients') }}) as numbered
order by recordid
