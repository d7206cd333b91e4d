with source as (

    select * from {{ source('eicu', 'allergy') }}

),

renamed as (

    select
        allergyid,
        patientunitstayid,
        allergyoffset,
        allergyenteredoffset,
        {{ clean_text('allergynotetype') }} as allergynotetype,
        {{ clean_text('specialtytype') }} as specialtytype,
        {{ clean_text('usertype') }} as usertype,
        {{ clean_text('rxincluded') }} as rxincluded,
        {{ clean_text('writtenineicu') }} as writtenineicu,
        {{ clean_text('drugname') }} as drugname,
        {{ clean_text('allergytype') }} as allergytype,
        {{ clean_text('allergyname') }} as allergyname,
        drughiclseqno
    from source

)

select * from renamed
