with source as (

    select * from {{ source('mimic_iv', 'd_items') }}

),

renamed as (

    select
        itemid,
        {{ clean_text('label') }} as label,
        {{ clean_text('abbreviation') }} as abbreviation,
        {{ clean_text('linksto') }} as linksto,
        {{ clean_text('category') }} as category,
        {{ clean_text('unitname') }} as unitname,
        {{ clean_text('param_type') }} as param_type,
        lownormalvalue,
        highnormalvalue
    from source

)

select * from renamed
