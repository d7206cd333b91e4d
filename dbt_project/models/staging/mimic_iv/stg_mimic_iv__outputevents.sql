with source as (

    select * from {{ source('mimic_iv', 'outputevents') }}

),

renamed as (

    select
        subject_id,
        hadm_id,
        stay_id,
        caregiver_id,
        charttime,
        storetime,
        itemid,
        value,
        {{ clean_text('valueuom') }} as valueuom
    from source

)

select * from renamed
