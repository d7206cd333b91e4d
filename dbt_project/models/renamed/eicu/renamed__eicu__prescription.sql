{{ config(alias='prescription') }}
select
    medicationid as prescription_id,
    patientunitstayid as unit_id,
    drugname as drug_name,
    dosage,
    routeadmin as administration_route,
    drugstarttime as medication_start_time,
    drugstoptime as medication_stop_time
from {{ ref('int_renamed__eicu__medication') }}
order by prescription_id
