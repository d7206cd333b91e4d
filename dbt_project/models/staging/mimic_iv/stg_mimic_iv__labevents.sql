with source as (

    select * from {{ source('mimic_iv', 'labevents') }}

),

renamed as (

    select
        labevent_id,
        subject_id,
        hadm_id,
        specimen_id,
        itemid,
        {{ clean_text('order_provider_id') }} as order_provider_id,
        charttime,
        storetime,
        {{ clean_text('value') }} as value,
        valuenum,
        {{ clean_text('valueuom') }} as valueuom,
        ref_range_lower,
        ref_range_upper,
        {{ clean_text('flag') }} as flag,
        {{ clean_text('priority') }} as priority,
        {{ clean_text('comments') }} as comments
    from source

)

select * from renamed
