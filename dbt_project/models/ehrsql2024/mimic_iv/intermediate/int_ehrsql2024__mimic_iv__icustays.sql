with stays as (

    select *, row_number() over () as file_row
    from {{ ref('stg_mimic_iv__icustays') }}

),

shifted as (

    select
        s.file_row,
        s.subject_id,
        s.hadm_id,
        s.stay_id,
        {{ mimic_iv_source_key(stay_id='s.stay_id') }} as source_key,
        {{ ehrsql2024_text('s.first_careunit') }} as first_careunit,
        {{ ehrsql2024_text('s.last_careunit') }} as last_careunit,
        {{ ehrsql2024_shift('s.intime', 'o.offset_days') }} as intime,
        {{ ehrsql2024_shift('s.outtime', 'o.offset_days') }} as outtime
    from stays as s
    left join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = s.subject_id
    where s.hadm_id in (select hadm_id from {{ ref('int_ehrsql2024__mimic_iv__admissions') }})

)

select
    file_row, source_key,
    subject_id, hadm_id, stay_id, {{ ehrsql2024_loaded('first_careunit') }} as first_careunit, {{ ehrsql2024_loaded('last_careunit') }} as last_careunit, intime, outtime
from shifted
where intime is not null
