with source as (

    select * from {{ source('mimic_iv', 'procedures_icd') }}

),

renamed as (

    select
        subject_id,
        hadm_id,
        seq_num,
        chartdate,
        {{ clean_text('icd_code') }} as icd_code,
        icd_version
    from source

)

select * from renamed
