{{ config(alias='procedures_icd') }}
-- charttime = chartdate at 00:00, replaced by the admission's dischtime when outside
-- [admittime, dischtime] (original times), then shifted; codes must be in d_icd_procedures.
with procedures as (

    select *, row_number() over () as file_row
    from {{ ref('stg_mimic_iv__procedures_icd') }}

),

dated as (

    select
        p.file_row,
        p.subject_id,
        p.hadm_id,
        'icd' || cast(p.icd_version as varchar) || '|' || {{ ehrsql2024_text('p.icd_code') }} as icd_code,
        case
            when cast(p.chartdate as timestamp) < a.original_admittime
              or cast(p.chartdate as timestamp) > a.original_dischtime
                then a.original_dischtime
            else cast(p.chartdate as timestamp)
        end as original_charttime
    from procedures as p
    left join {{ ref('int_ehrsql2024__mimic_iv__admissions_shifted') }} as a on a.hadm_id = p.hadm_id
    where p.hadm_id in (select hadm_id from {{ ref('ehrsql2024__mimic_iv__admissions') }})

),

shifted as (

    select d.*, {{ ehrsql2024_shift('d.original_charttime', 'o.offset_days') }} as charttime
    from dated as d
    left join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = d.subject_id

)

select
    row_number() over (order by file_row) - 1 as row_id,
    subject_id, hadm_id, icd_code, charttime
from shifted
where icd_code in (select icd_code from {{ ref('ehrsql2024__mimic_iv__d_icd_procedures') }})
  and charttime is not null
  and charttime >= {{ ehrsql2024_start() }}
order by row_id
