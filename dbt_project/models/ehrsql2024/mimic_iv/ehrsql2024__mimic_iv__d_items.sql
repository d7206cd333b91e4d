{{ config(alias='d_items') }}
select
    row_id,
    itemid,
    label,
    abbreviation,
    linksto
from ({{ mimic_iv_profile_rows('ehrsql2024', 'd_items') }}) as numbered
order by row_id
