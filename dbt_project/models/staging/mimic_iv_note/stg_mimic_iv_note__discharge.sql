with source as (

    select * from {{ source('mimic_iv_note', 'discharge') }}

),

renamed as (

    select
        {{ clean_text('note_id') }} as note_id,
        subject_id,
        hadm_id,
        {{ clean_text('note_type') }} as note_type,
        note_seq,
        charttime,
        storetime,
        text
    from source

)

select * from renamed
