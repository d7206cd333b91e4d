{{ config(alias='microbiologyresults') }}
select
    row_id as recordid,
    subject_id as patientid,
    hadm_id as admissionid,
    charttime as collecteddatetime,
    spec_type_desc as specimentype,
    test_name as testname,
    org_name as organismname
from ({{ mimic_iv_profile_rows('renamed', 'microbiologyevents') }}) as numbered
order by recordid
