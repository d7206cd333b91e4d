{{ config(alias='labtesttypes') }}
select
    row_id as recordid,
    itemid as itemcode,
    label as itemname
from ({{ mimic_iv_profile_rows('renamed', 'd_labitems') }}) as numbered
order by recordid
