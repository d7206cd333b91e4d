{{ config(alias='clinicalitemtypes') }}
select
    row_id as recordid,
    itemid as itemcode,
    label as itemname,
    abbreviation,
    {{ renamed_table_name('mimic_iv', 'linksto') }} as itemtype
from ({{ mimic_iv_profile_rows('renamed', 'd_items') }}) as numbered
order by recordid
