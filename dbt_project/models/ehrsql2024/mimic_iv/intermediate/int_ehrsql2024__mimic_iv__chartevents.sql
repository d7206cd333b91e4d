-- The nine vital-sign items only (temperature, SpO2, heart rate, respiration, arterial systolic,
-- diastolic and mean pressure, daily weight, height), complete rows of cohort patients.
with charts as (

    select *, row_number() over () as file_row
    from {{ ref('stg_mimic_iv__chartevents') }}

),

shifted as (

    select
        c.file_row,
        c.subject_id,
        c.hadm_id,
        c.stay_id,
        c.itemid,
        {{ mimic_iv_source_key(stay_id='c.stay_id', charttime='c.charttime', itemid='c.itemid', value='c.value') }} as source_key,
        {{ ehrsql2024_shift('c.charttime', 'o.offset_days') }} as charttime,
        c.valuenum,
        {{ ehrsql2024_text('c.valueuom') }} as valueuom
    from charts as c
    left join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = c.subject_id
    where c.itemid in (223762, 220277, 220045, 220210, 220050, 220051, 220052, 224639, 226730)
      and c.subject_id in (select subject_id from {{ ref('int_ehrsql2024__mimic_iv__cohort') }})
      and c.hadm_id in (select hadm_id from {{ ref('int_ehrsql2024__mimic_iv__admissions') }})
      and c.stay_id is not null
      and c.charttime is not null
      and c.valuenum is not null

)

select
    file_row, source_key,
    subject_id, hadm_id, stay_id, itemid, charttime, valuenum, {{ ehrsql2024_loaded('valueuom') }} as valueuom
from shifted
where valueuom is not null
  and charttime is not null
  and charttime >= {{ ehrsql2024_start() }}
