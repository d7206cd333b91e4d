{{ config(alias='outputrecords') }}
select
    row_id as recordid,
    subject_id as patientid,
    hadm_id as admissionid,
    stay_id as icuadmissionid,
    charttime as recordeddatetime,
    itemid as itemcode,
    value as volume,
    valueuom as volumeunit
from ({{ mimic_iv_profile_rows('renamed', 'outputevents') }}) as numbered
order by recordid
