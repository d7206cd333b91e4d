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
        {{ mimic_iv_source_key(hadm_id='p.hadm_id', seq_num='p.seq_num', icd_code='p.icd_code', icd_version='p.icd_version') }} as source_key,
        p.icd_version,
        {{ ehrsql2024_text('p.icd_code') }} as icd_code,
        case
            when cast(p.chartdate as timestamp) < a.original_admittime
              or cast(p.chartdate as timestamp) > a.original_dischtime
                then a.original_dischtime
            else cast(p.chartdate as timestamp)
        end as original_charttime
    from procedures as p
    left join {{ ref('int_ehrsql2024__mimic_iv__admissions_shifted') }} as a on a.hadm_id = p.hadm_id
    where p.hadm_id in (select hadm_id from {{ ref('int_ehrsql2024__mimic_iv__admissions') }})

),

shifted as (

    select d.*, {{ ehrsql2024_shift('d.original_charttime', 'o.offset_days') }} as charttime
    from dated as d
    left join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = d.subject_id

)

select
    file_row,
    source_key, subject_id, hadm_id, icd_version, icd_code, charttime
from shifted as s
where exists (
    select 1 from {{ ref('int_ehrsql2024__mimic_iv__d_icd_procedures') }} as codes
    where codes.icd_version = s.icd_version and codes.icd_code = s.icd_code
)
  and charttime is not null
  and charttime >= {{ ehrsql2024_start() }}
