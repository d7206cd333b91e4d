{{ config(alias='intakeoutput') }}
-- EHRSQL eICU `intakeoutput` (columns and order as the published eicu.sql).

select
    intakeoutputid,
    patientunitstayid,
    cellpath,
    celllabel,
    cellvaluenumeric,
    intakeoutputtime
from {{ ref('int_ehrsql_eicu__eicu__intakeoutput') }}
order by intakeoutputid
