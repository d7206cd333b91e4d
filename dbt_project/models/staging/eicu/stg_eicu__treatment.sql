with source as (

    select * from {{ source('eicu', 'treatment') }}

),

renamed as (

    select
        treatmentid,
        patientunitstayid,
        treatmentoffset,
        {{ clean_text('treatmentstring') }} as treatmentstring,
        {{ clean_text('activeupondischarge') }} as activeupondischarge
    from source

)

select * from renamed
