{{ config(alias='hospital') }}
select
    hospitalid as hospital_id,
    numbedscategory as bed_capacity_category,
    teachingstatus as teaching_status,
    region
from {{ ref('int_renamed__eicu__hospital') }}
order by hospital_id
