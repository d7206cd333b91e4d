{{ config(alias='allergy_reaction') }}
select
    allergyid as allergy_id,
    patientunitstayid as unit_id,
    drugname as drug_name,
    allergyname as allergy_name,
    allergytime as allergy_time
from {{ ref('int_renamed__eicu__allergy') }}
order by allergy_id
