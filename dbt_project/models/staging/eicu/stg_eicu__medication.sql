with source as (

    select * from {{ source('eicu', 'medication') }}

),

renamed as (

    select
        medicationid,
        patientunitstayid,
        drugorderoffset,
        drugstartoffset,
        {{ clean_text('drugivadmixture') }} as drugivadmixture,
        {{ clean_text('drugordercancelled') }} as drugordercancelled,
        {{ clean_text('drugname') }} as drugname,
        drughiclseqno,
        {{ clean_text('dosage') }} as dosage,
        {{ clean_text('routeadmin') }} as routeadmin,
        {{ clean_text('frequency') }} as frequency,
        {{ clean_text('loadingdose') }} as loadingdose,
        {{ clean_text('prn') }} as prn,
        drugstopoffset,
        gtc
    from source

)

select * from renamed
