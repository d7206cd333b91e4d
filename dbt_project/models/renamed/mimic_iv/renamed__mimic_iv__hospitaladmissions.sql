{{ config(alias='hospitaladmissions') }}
select
    row_id as recordid,
    subject_id as patientid,
    hadm_id as admissionid,
    admittime as admitdatetime,
    dischtime as dischargedatetime,
    admission_type as admissiontype,
    admission_location as admitsource,
    discharge_location as dischargedestination,
    insurance as insurancetype,
    language,
    marital_status as maritalstatus,
    age
from ({{ mimic_iv_profile_rows('renamed', 'admissions') }}) as numbered
order by recordid
