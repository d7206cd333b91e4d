{{ config(alias='intakerecords') }}
select
    row_id as recordid,
    subject_id as patientid,
    hadm_id as admissionid,
    stay_id as icuadmissionid,
    starttime as startdatetime,
    itemid as itemcode,
    totalamount as totalvolume,
    totalamountuom as volumeunit
from ({{ mimic_iv_profile_rows('renamed', 'inputevents') }}) as numbered
order by recordid
