{{ config(alias='d_labitems') }}
-- Items with a label, except labels that the label-owner list gives to another table. A whitespace-only
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
    row_number() over (order by i.file_row) - 1 as row_id,
    i.itemid,
    {{ ehrsql2024_loaded('i.label') }} as label  -- the blank label is NULL once loaded
from items as i
left join blank_labels as b on b.file_row = i.file_row
left join {{ ref('int_ehrsql2024__mimic_iv__label_owner') }} as o on o.label = i.label
where (i.label is not null or b.file_row is not null)
  and (o.owner_table is null or o.owner_table = 'labevents')
order by row_id
