{{ config(alias='patienttransfers') }}
select
    row_id as recordid,
    subject_id as patientid,
    hadm_id as admissionid,
    transfer_id as transferid,
    eventtype as transfertype,
    careunit,
    intime as transferindatetime,
    outtime as transferoutdatetime
from ({{ mimic_iv_profile_rows('renamed', 'transfers') }}) as numbered
order by recordid
