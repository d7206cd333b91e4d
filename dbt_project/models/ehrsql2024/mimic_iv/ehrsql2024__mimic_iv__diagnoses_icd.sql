{{ config(alias='diagnoses_icd') }}
-- charttime = the admission's original admittime, then shifted; codes must be in d_icd_diagnoses.
with diagnoses as (

    select *, row_number() over () as file_row
    from {{ ref('stg_mimic_iv__diagnoses_icd') }}

),

shifted as (

    select
        d.file_row,
        d.subject_id,
        d.hadm_id,
        'icd' || cast(d.icd_version as varchar) || '|' || {{ ehrsql2024_text('d.icd_code') }} as icd_code,
        {{ ehrsql2024_shift('a.original_admittime', 'o.offset_days') }} as charttime
    from diagnoses as d
    left join {{ ref('int_ehrsql2024__mimic_iv__admissions_shifted') }} as a on a.hadm_id = d.hadm_id
    left join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = d.subject_id
    where d.hadm_id in (select hadm_id from {{ ref('ehrsql2024__mimic_iv__admissions') }})

)

select
    row_number() over (order by file_row) - 1 as row_id,
    subject_id, hadm_id, icd_code, charttime
from shifted
where icd_code in (select icd_code from {{ ref('ehrsql2024__mimic_iv__d_icd_diagnoses') }})
  and charttime is not null
  and charttime >= {{ ehrsql2024_start() }}
order by row_id
