{{ config(alias='treatment') }}
-- EHRSQL eICU `treatment` (columns and order as the published eicu.sql).

select
    treatmentid,
    patientunitstayid,
    treatmentname,
    treatmenttime
from {{ ref('int_ehrsql_eicu__eicu__treatment') }}
order by treatmentid
