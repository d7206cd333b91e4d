with source as (

    select * from {{ source('mimic_iv', 'transfers') }}

),

renamed as (

    select
        subject_id,
        hadm_id,
        transfer_id,
        {{ clean_text('eventtype') }} as eventtype,
        {{ clean_text('careunit') }} as careunit,
        intime,
        outtime
    from source

)

select * from renamed
