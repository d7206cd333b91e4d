with source as (

    select * from {{ source('mimic_iv', 'd_labitems') }}

),

renamed as (

    select
        itemid,
        {{ clean_text('label') }} as label,
        {{ clean_text('fluid') }} as fluid,
        {{ clean_text('category') }} as category
    from source

)

select * from renamed
