-- No row key: several rows can share (stay_id, itemid, charttime), so no unique test.
with source as (

    select * from {{ source('mimic_iv', 'chartevents') }}

),

renamed as (

    select
        subject_id,
        hadm_id,
        stay_id,
        caregiver_id,
        charttime,
        storetime,
        itemid,
        {{ clean_text('value') }} as value,
        valuenum,
        {{ clean_text('valueuom') }} as valueuom,
        warning
    from source

)

select * from renamed
