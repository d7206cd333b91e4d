{{ config(alias='lab') }}
-- EHRSQL eICU `lab` (columns and order as the published eicu.sql).

select
    labid,
    patientunitstayid,
    labname,
    labresult,
    labresulttime
from {{ ref('int_ehrsql_eicu__eicu__lab') }}
order by labid
