{{ config(alias='admissionprocedures') }}
select
    row_id as recordid,
    subject_id as patientid,
    hadm_id as admissionid,
    icd_code as icdcode,
    icd_version as codeversion,
    charttime as recordeddatetime
from ({{ mimic_iv_profile_rows('renamed', 'procedures_icd') }}) as numbered
order by recordid
