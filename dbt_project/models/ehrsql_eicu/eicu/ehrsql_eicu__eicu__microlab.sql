{{ config(alias='microlab') }}
-- EHRSQL eICU `microlab` (columns and order as the published eicu.sql).

select
    microlabid,
    patientunitstayid,
    culturesite,
    organism,
    culturetakentime
from {{ ref('int_ehrsql_eicu__eicu__microlab') }}
order by microlabid
