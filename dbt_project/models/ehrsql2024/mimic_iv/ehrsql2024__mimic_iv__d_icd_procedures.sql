{{ config(alias='d_icd_procedures') }}
-- Codes become 'icd<version>|<code>'; the first row of a duplicated code, then of a duplicated title, is kept.
with codes as (

    select
        row_number() over () as file_row,
        'icd' || cast(icd_version as varchar) || '|' || {{ ehrsql2024_text('icd_code') }} as icd_code,
        {{ ehrsql2024_text('long_title') }} as long_title
    from {{ ref('stg_mimic_iv__d_icd_procedures') }}

),

kept as (

    select * from codes

),

unique_codes as (

    select * from kept
    where icd_code is not null and long_title is not null
    qualify row_number() over (partition by icd_code order by file_row) = 1

),

unique_titles as (

    select * from unique_codes
    qualify row_number() over (partition by long_title order by file_row) = 1

)

select
    row_number() over (order by file_row) - 1 as row_id,
    icd_code,
    {{ ehrsql2024_loaded('long_title') }} as long_title
from unique_titles
order by row_id
