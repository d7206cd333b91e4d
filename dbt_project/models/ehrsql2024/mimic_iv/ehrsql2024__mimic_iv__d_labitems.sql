{{ config(alias='d_labitems') }}
select
    row_id,
    itemid,
    label
from ({{ mimic_iv_profile_rows('ehrsql2024', 'd_labitems') }}) as numbered
order by row_id
