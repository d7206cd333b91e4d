with source as (

    select * from {{ source('eicu', 'hospital') }}

),

renamed as (

    select
        hospitalid,
        {{ clean_text('numbedscategory') }} as numbedscategory,
        teachingstatus,  -- loaded as BOOLEAN from 't'/'f'
        {{ clean_text('region') }} as region
    from source

)

select * from renamed
