-- Items of chartevents, inputevents and outputevents with a label (the label-owner filter of the
-- ehrsql2024 profile comes later).
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
    i.file_row,
    {{ mimic_iv_source_key(itemid='i.itemid') }} as source_key,
    i.itemid,
    {{ ehrsql2024_loaded('i.label') }} as label,
    {{ ehrsql2024_loaded('i.abbreviation') }} as abbreviation,
    {{ ehrsql2024_loaded('i.linksto') }} as linksto
from items as i
where i.label is not null
  and i.linksto in ('inputevents', 'outputevents', 'chartevents')
