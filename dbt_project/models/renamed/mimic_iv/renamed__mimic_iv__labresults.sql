{{ config(alias='labresults') }}
select
    row_id as recordid,
    subject_id as patientid,
    hadm_id as admissionid,
    itemid as itemcode,
    charttime as resultdatetime,
    valuenum as resultvalue,
    valueuom as resultunit
from ({{ mimic_iv_profile_rows('renamed', 'labevents') }}) as numbered
order by recordid
