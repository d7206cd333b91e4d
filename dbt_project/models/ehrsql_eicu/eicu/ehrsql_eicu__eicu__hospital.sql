{{ config(alias='hospital') }}
-- `hospital` dimension (EHR-ChatQA's eICU database; eICU column names).

select
    hospitalid,
    numbedscategory,
    teachingstatus,
    region
from {{ ref('int_ehrsql_eicu__eicu__hospital') }}
order by hospitalid
