with source as (

    select * from {{ source('eicu', 'diagnosis') }}

),

renamed as (

    select
        diagnosisid,
        patientunitstayid,
        {{ clean_text('activeupondischarge') }} as activeupondischarge,
        diagnosisoffset,
        {{ clean_text('diagnosisstring') }} as diagnosisstring,
        {{ clean_text('icd9code') }} as icd9code,
        {{ clean_text('diagnosispriority') }} as diagnosispriority
    from source

)

select * from renamed
