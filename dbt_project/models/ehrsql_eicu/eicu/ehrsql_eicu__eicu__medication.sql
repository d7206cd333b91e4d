{{ config(alias='medication') }}
-- EHRSQL eICU `medication` (columns and order as the published eicu.sql).

select
    medicationid,
    patientunitstayid,
    drugname,
    dosage,
    routeadmin,
    drugstarttime,
    drugstoptime
from {{ ref('int_ehrsql_eicu__eicu__medication') }}
order by medicationid
