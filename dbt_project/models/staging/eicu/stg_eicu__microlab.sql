with source as (

    select * from {{ source('eicu', 'microlab') }}

),

renamed as (

    select
        microlabid,
        patientunitstayid,
        culturetakenoffset,
        {{ clean_text('culturesite') }} as culturesite,
        {{ clean_text('organism') }} as organism,
        {{ clean_text('antibiotic') }} as antibiotic,
        {{ clean_text('sensitivitylevel') }} as sensitivitylevel
    from source

)

select * from renamed
