{{ config(alias='diagnosis') }}
-- EHRSQL eICU `diagnosis` (columns and order as the published eicu.sql).

select
    diagnosisid,
    patientunitstayid,
    diagnosisname,
    diagnosistime,
    icd9code
from {{ ref('int_ehrsql_eicu__eicu__diagnosis') }}
order by diagnosisid
