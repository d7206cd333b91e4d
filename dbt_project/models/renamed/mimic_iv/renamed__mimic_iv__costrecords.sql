{{ config(alias='costrecords') }}
-- eventtype names this profile's tables (admissiondiagnoses, labresults, ...), as in EHR-ChatQA.
select
    row_id as recordid,
    subject_id as patientid,
    hadm_id as admissionid,
    {{ renamed_table_name('mimic_iv', 'event_type') }} as eventtype,
    event_id as costid,
    chargetime as costdatetime,
    cost as costamount
from ({{ mimic_iv_cost_rows('renamed') }}) as costs
order by recordid
