-- Source cells that hold only whitespace, by table, column and file row.
-- The published build reads the CSVs with pandas, where an empty field is NaN but a field of spaces is
-- a string that becomes '' after strip(): such a cell survives its NULL filters. Staging maps both to
-- NULL, so this one model reads the two affected source columns to tell them apart. (Kept here, not in
-- staging, so that staging's contract is unchanged; the only source() read of this profile.)
with labevent_units as (

    select row_number() over () as file_row, valueuom as cell
    from {{ source('mimic_iv', 'labevents') }}

),

labitem_labels as (

    select row_number() over () as file_row, label as cell
    from {{ source('mimic_iv', 'd_labitems') }}

)

select 'labevents' as table_name, 'valueuom' as column_name, file_row
from labevent_units
where cell is not null and trim(cell) = ''
union all
select 'd_labitems', 'label', file_row
from labitem_labels
where cell is not null and trim(cell) = ''
