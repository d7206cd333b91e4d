with source as (

    select * from {{ source('mimic_iv', 'patients') }}

),

renamed as (

    select
        subject_id,
        {{ clean_text('gender') }} as gender,
        anchor_age,
        anchor_year,
        {{ clean_text('anchor_year_group') }} as anchor_year_group,
        dod
    from source

)

select * from renamed
