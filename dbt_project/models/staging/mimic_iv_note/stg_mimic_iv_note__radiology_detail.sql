with source as (

    select * from {{ source('mimic_iv_note', 'radiology_detail') }}

),

renamed as (

    select
        {{ clean_text('note_id') }} as note_id,
        subject_id,
        {{ clean_text('field_name') }} as field_name,
        field_value,
        field_ordinal
    from source

)

select * from renamed
