{{ config(alias='clinicalevents') }}
select
    row_id as recordid,
    subject_id as patientid,
    hadm_id as admissionid,
    stay_id as icuadmissionid,
    itemid as itemcode,
    charttime as recordeddatetime,
    valuenum as value,
    valueuom as unit
from ({{ mimic_iv_profile_rows('renamed', 'chartevents') }}) as numbered
order by recordid
