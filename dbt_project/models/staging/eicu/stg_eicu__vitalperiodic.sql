-- Optional source: the demo ships no vitalPeriodic file, so the raw table may be empty.
with source as (

    select * from {{ source('eicu', 'vitalperiodic') }}

),

renamed as (

    select
        vitalperiodicid,
        patientunitstayid,
        observationoffset,
        temperature,
        sao2,
        heartrate,
        respiration,
        cvp,
        etco2,
        systemicsystolic,
        systemicdiastolic,
        systemicmean,
        pasystolic,
        padiastolic,
        pamean,
        st1,
        st2,
        st3,
        icp
    from source

)

select * from renamed
