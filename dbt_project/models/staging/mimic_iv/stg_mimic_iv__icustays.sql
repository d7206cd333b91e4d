with source as (

    select * from {{ source('mimic_iv', 'icustays') }}

),

renamed as (

    select
        subject_id,
        hadm_id,
        stay_id,
        {{ clean_text('first_careunit') }} as first_careunit,
        {{ clean_text('last_careunit') }} as last_careunit,
        intime,
        outtime,
        los
    from source

)

select * from renamed
