-- Items with a label (the label-owner filter of the ehrsql2024 profile comes later). A whitespace-only
-- label counts as a label ('' in the published build, which keeps the item) and is NULL in the output.
with items as (

    select
        row_number() over () as file_row,
        itemid,
        {{ ehrsql2024_text('label') }} as label
    from {{ ref('stg_mimic_iv__d_labitems') }}

),

blank_labels as (

    select file_row from {{ ref('int_ehrsql2024__mimic_iv__blank_text_cells') }}
    where table_name = 'd_labitems' and column_name = 'label'

)

select
    i.file_row,
    {{ mimic_iv_source_key(itemid='i.itemid') }} as source_key,
    i.itemid,
    {{ ehrsql2024_loaded('i.label') }} as label  -- the blank label is NULL once loaded
from items as i
left join blank_labels as b on b.file_row = i.file_row
where i.label is not null or b.file_row is not null
