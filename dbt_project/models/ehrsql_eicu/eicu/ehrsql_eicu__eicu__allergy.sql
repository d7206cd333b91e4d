{{ config(alias='allergy') }}
-- EHRSQL eICU `allergy` (columns and order as the published eicu.sql).

select
    allergyid,
    patientunitstayid,
    drugname,
    allergyname,
    allergytime
from {{ ref('int_ehrsql_eicu__eicu__allergy') }}
order by allergyid
