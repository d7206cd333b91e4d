with source as (

    select * from {{ source('eicu', 'intakeoutput') }}

),

renamed as (

    select
        intakeoutputid,
        patientunitstayid,
        intakeoutputoffset,
        intaketotal,
        outputtotal,
        dialysistotal,
        nettotal,
        intakeoutputentryoffset,
        {{ clean_text('cellpath') }} as cellpath,
        {{ clean_text('celllabel') }} as celllabel,
        cellvaluenumeric,
        {{ clean_text('cellvaluetext') }} as cellvaluetext
    from source

)

select * from renamed
