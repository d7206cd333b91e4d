with source as (

    select * from {{ source('mimic_iv', 'admissions') }}

),

renamed as (

    select
        subject_id,
        hadm_id,
        admittime,
        dischtime,
        deathtime,
        {{ clean_text('admission_type') }} as admission_type,
        {{ clean_text('admit_provider_id') }} as admit_provider_id,
        {{ clean_text('admission_location') }} as admission_location,
        {{ clean_text('discharge_location') }} as discharge_location,
        {{ clean_text('insurance') }} as insurance,
        {{ clean_text('language') }} as language,
        {{ clean_text('marital_status') }} as marital_status,
        {{ clean_text('race') }} as race,
        edregtime,
        edouttime,
        hospital_expire_flag
    from source

)

select * from renamed
