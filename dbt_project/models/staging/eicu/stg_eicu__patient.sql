with source as (

    select * from {{ source('eicu', 'patient') }}

),

renamed as (

    select
        patientunitstayid,
        patienthealthsystemstayid,
        {{ clean_text('gender') }} as gender,
        {{ clean_text('age') }} as age,  -- text on purpose: ages over 89 are coded '> 89'
        {{ clean_text('ethnicity') }} as ethnicity,
        hospitalid,
        wardid,
        {{ clean_text('apacheadmissiondx') }} as apacheadmissiondx,
        admissionheight,
        {{ clean_text('hospitaladmittime24') }} as hospitaladmittime24,
        hospitaladmitoffset,
        {{ clean_text('hospitaladmitsource') }} as hospitaladmitsource,
        hospitaldischargeyear,
        {{ clean_text('hospitaldischargetime24') }} as hospitaldischargetime24,
        hospitaldischargeoffset,
        {{ clean_text('hospitaldischargelocation') }} as hospitaldischargelocation,
        {{ clean_text('hospitaldischargestatus') }} as hospitaldischargestatus,
        {{ clean_text('unittype') }} as unittype,
        {{ clean_text('unitadmittime24') }} as unitadmittime24,
        {{ clean_text('unitadmitsource') }} as unitadmitsource,
        unitvisitnumber,
        {{ clean_text('unitstaytype') }} as unitstaytype,
        admissionweight,
        dischargeweight,
        {{ clean_text('unitdischargetime24') }} as unitdischargetime24,
        unitdischargeoffset,
        {{ clean_text('unitdischargelocation') }} as unitdischargelocation,
        {{ clean_text('unitdischargestatus') }} as unitdischargestatus,
        {{ clean_text('uniquepid') }} as uniquepid
    from source

)

select * from renamed
