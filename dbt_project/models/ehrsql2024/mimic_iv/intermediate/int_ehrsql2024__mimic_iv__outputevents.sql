-- Outputs in ml of items in d_items, with an admission and an ICU stay.
with outputs as (

    select *, row_number() over () as file_row
    from {{ ref('stg_mimic_iv__outputevents') }}

),

shifted as (

    select
        e.file_row,
        e.subject_id,
        e.hadm_id,
        e.stay_id,
        {{ ehrsql2024_shift('e.charttime', 'o.offset_days') }} as charttime,
        e.itemid,
        {{ mimic_iv_source_key(stay_id='e.stay_id', charttime='e.charttime', itemid='e.itemid') }} as source_key,
        e.value,
        {{ ehrsql2024_text('e.valueuom') }} as valueuom
    from outputs as e
    left join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = e.subject_id
    where e.hadm_id in (select hadm_id from {{ ref('int_ehrsql2024__mimic_iv__admissions') }})
      and e.stay_id is not null
      and e.value is not null
      and e.itemid in (select itemid from {{ ref('int_ehrsql2024__mimic_iv__d_items') }})

)

select
    file_row, source_key,
    subject_id, hadm_id, stay_id, charttime, itemid, value, {{ ehrsql2024_loaded('valueuom') }} as valueuom
from shifted
where valueuom = 'ml'
  and charttime is not null
  and charttime >= {{ ehrsql2024_start() }}
