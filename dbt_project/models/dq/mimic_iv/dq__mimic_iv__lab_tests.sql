{{ config(alias='lab_tests') }}
-- The lab dictionary, restricted to the tests the extract's lab results use.
select itemid as test_code, label as name, fluid, category
from {{ ref('stg_mimic_iv__d_labitems') }}
where itemid in (select test_code from {{ ref('dq__mimic_iv__lab_results') }})
