{{ config(alias='icuepisodes') }}
select
    row_id as recordid,
    subject_id as patientid,
    hadm_id as admissionid,
    stay_id as icuadmissionid,
    first_careunit as initialcareunit,
    last_careunit as finalcareunit,
    intime as admitdatetime,
    outtime as dischargedatetime
from ({{ mimic_iv_profile_rows('renamed', 'icustays') }}) as numbered
order by recordid
