with source as (

    select * from {{ source('mimic_iv', 'd_icd_procedures') }}

),

renamed as (

    select
        {{ clean_text('icd_code') }} as icd_code,
        icd_version,
        {{ clean_text('long_title') }} as long_title
    from source

)

select * from renamed
