with source as (

    select * from {{ source('mimic_iv', 'microbiologyevents') }}

),

renamed as (

    select
        microevent_id,
        subject_id,
        hadm_id,
        micro_specimen_id,
        {{ clean_text('order_provider_id') }} as order_provider_id,
        chartdate,
        charttime,
        spec_itemid,
        {{ clean_text('spec_type_desc') }} as spec_type_desc,
        test_seq,
        storedate,
        storetime,
        test_itemid,
        {{ clean_text('test_name') }} as test_name,
        org_itemid,
        {{ clean_text('org_name') }} as org_name,
        isolate_num,
        {{ clean_text('quantity') }} as quantity,
        ab_itemid,
        {{ clean_text('ab_name') }} as ab_name,
        {{ clean_text('dilution_text') }} as dilution_text,
        {{ clean_text('dilution_comparison') }} as dilution_comparison,  -- source pads the operator to a fixed width ('<=        ')
        dilution_value,
        {{ clean_text('interpretation') }} as interpretation,
        {{ clean_text('comments') }} as comments
    from source

)

select * from renamed
