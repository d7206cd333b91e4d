with transfers as (

    select *, row_number() over () as file_row
    from {{ ref('stg_mimic_iv__transfers') }}

),

shifted as (

    select
        t.file_row,
        t.subject_id,
        t.hadm_id,
        t.transfer_id,
        {{ mimic_iv_source_key(transfer_id='t.transfer_id') }} as source_key,
        {{ ehrsql2024_text('t.eventtype') }} as eventtype,
        {{ ehrsql2024_text('t.careunit') }} as careunit,
        {{ ehrsql2024_shift('t.intime', 'o.offset_days') }} as intime,
        {{ ehrsql2024_shift('t.outtime', 'o.offset_days') }} as outtime
    from transfers as t
    left join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = t.subject_id
    where t.hadm_id in (select hadm_id from {{ ref('int_ehrsql2024__mimic_iv__admissions') }})

)

select
    file_row, source_key,
    subject_id, hadm_id, transfer_id, {{ ehrsql2024_loaded('eventtype') }} as eventtype, {{ ehrsql2024_loaded('careunit') }} as careunit, intime, outtime
from shifted
where intime is not null
