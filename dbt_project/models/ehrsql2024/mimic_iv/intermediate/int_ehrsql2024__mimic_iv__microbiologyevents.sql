-- charttime falls back to chartdate.
with micro as (

    select *, row_number() over () as file_row
    from {{ ref('stg_mimic_iv__microbiologyevents') }}

),

shifted as (

    select
        m.file_row,
        m.subject_id,
        m.hadm_id,
        {{ mimic_iv_source_key(microevent_id='m.microevent_id', micro_specimen_id='m.micro_specimen_id', test_itemid='m.test_itemid', org_itemid='m.org_itemid') }} as source_key,
        {{ ehrsql2024_shift('coalesce(m.charttime, m.chartdate)', 'o.offset_days') }} as charttime,
        {{ ehrsql2024_text('m.spec_type_desc') }} as spec_type_desc,
        {{ ehrsql2024_text('m.test_name') }} as test_name,
        {{ ehrsql2024_text('m.org_name') }} as org_name
    from micro as m
    left join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = m.subject_id
    where m.hadm_id in (select hadm_id from {{ ref('int_ehrsql2024__mimic_iv__admissions') }})

)

select
    file_row, source_key,
    subject_id, hadm_id, charttime, {{ ehrsql2024_loaded('spec_type_desc') }} as spec_type_desc, {{ ehrsql2024_loaded('test_name') }} as test_name, {{ ehrsql2024_loaded('org_name') }} as org_name
from shifted
where charttime is not null
  and charttime >= {{ ehrsql2024_start() }}
