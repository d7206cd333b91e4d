{{ config(alias='medicationorders') }}
select
    row_id as recordid,
    subject_id as patientid,
    hadm_id as admissionid,
    starttime as startdatetime,
    stoptime as enddatetime,
    drug as medicationname,
    dose_val_rx as dosevalue,
    dose_unit_rx as doseunit,
    route as administrationroute
from ({{ mimic_iv_profile_rows('renamed', 'prescriptions') }}) as numbered
order by recordid
