{{ config(alias='shifted_events', materialized='view') }}
-- The MEDS data of the build's shifted timeline: the patients of the ehrsql2024 database (its cohort) with every
-- time moved by the patient's offset (int_ehrsql2024__mimic_iv__subject_offsets, the shift of the ehrsql2024 and
-- renamed databases). An event after the profile's current time is dropped (the databases null such times; in MEDS a
-- null time would make it static). Static events keep their null time. Sorted per shard by ehrbench.meds.export, as
-- meds__mimic_iv__raw_events.
select
    e.subject_id,
    e.time + to_days(cast(o.offset_days as integer)) as time,
    e.code,
    e.numeric_value,
    e.text_value,
    e.hadm_id,
    e.icustay_id
from {{ ref('int_meds__mimic_iv__events') }} as e
join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = e.subject_id
where e.subject_id in (select subject_id from {{ ref('ehrsql2024__mimic_iv__patients') }})
  and (e.time is null
       or e.time + to_days(cast(o.offset_days as integer)) <= timestamp '{{ ehrsql2024_param("current_time") }}')
