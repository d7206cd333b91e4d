-- Inputs in ml of items in d_items, with an admission and an ICU stay.
with inputs as (

    select *, row_number() over () as file_row
    from {{ ref('stg_mimic_iv__inputevents') }}

),

shifted as (

    select
        i.file_row,
        i.subject_id,
        i.hadm_id,
        i.stay_id,
        {{ ehrsql2024_shift('i.starttime', 'o.offset_days') }} as starttime,
        i.itemid,
        {{ mimic_iv_source_key(stay_id='i.stay_id', orderid='i.orderid', itemid='i.itemid') }} as source_key,
        i.totalamount,
        {{ ehrsql2024_text('i.totalamountuom') }} as totalamountuom
    from inputs as i
    left join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = i.subject_id
    where i.hadm_id in (select hadm_id from {{ ref('int_ehrsql2024__mimic_iv__admissions') }})
      and i.stay_id is not null
      and i.totalamount is not null
      and i.itemid in (select itemid from {{ ref('int_ehrsql2024__mimic_iv__d_items') }})

)

select
    file_row, source_key,
    subject_id, hadm_id, stay_id, starttime, itemid, totalamount, {{ ehrsql2024_loaded('totalamountuom') }} as totalamountuom
from shifted
where totalamountuom = 'ml'
  and starttime is not null
  and starttime >= {{ ehrsql2024_start() }}
