{{ config(alias='d_items') }}
-- Items of chartevents, inputevents and outputevents with a label, except labels that the label-owner
-- list gives to another table.
with items as (

    select
        row_number() over () as file_row,
        itemid,
        {{ ehrsql2024_text('label') }} as label,
        {{ ehrsql2024_text('abbreviation') }} as abbreviation,
        {{ ehrsql2024_text('linksto') }} as linksto
    from {{ ref('stg_mimic_iv__d_items') }}

)

select
    row_number() over (order by i.file_row) - 1 as row_id,
    i.itemid,
    {{ ehrsql2024_loaded('i.label') }} as label,
    {{ ehrsql2024_loaded('i.abbreviation') }} as abbreviation,
    {{ ehrsql2024_loaded('i.linksto') }} as linksto
from items as i
left join {{ ref('int_ehrsql2024__mimic_iv__label_owner') }} as o on o.label = i.label
where i.label is not null
  and i.linksto in ('inputevents', 'outputevents', 'chartevents')
  and (o.owner_table is null or o.owner_table = 'inputevents')
order by row_id
