with source as (

    select * from {{ source('eicu', 'lab') }}

),

renamed as (

    select
        labid,
        patientunitstayid,
        labresultoffset,
        labtypeid,
        {{ clean_text('labname') }} as labname,
        labresult,
        {{ clean_text('labresulttext') }} as labresulttext,
        {{ clean_text('labmeasurenamesystem') }} as labmeasurenamesystem,
        {{ clean_text('labmeasurenameinterface') }} as labmeasurenameinterface,
        labresultrevisedoffset
    from source

)

select * from renamed
