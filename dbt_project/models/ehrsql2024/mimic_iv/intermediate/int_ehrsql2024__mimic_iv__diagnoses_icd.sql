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
        {{ mimic_iv_source_key(hadm_id='d.hadm_id', seq_num='d.seq_num', icd_code='d.icd_code', icd_version='d.icd_version') }} as source_key,
        d.icd_version,
        {{ ehrsql2024_text('d.icd_code') }} as icd_code,
        {{ ehrsql2024_shift('a.original_admittime', 'o.offset_days') }} as charttime
    from diagnoses as d
    left join {{ ref('int_ehrsql2024__mimic_iv__admissions_shifted') }} as a on a.hadm_id = d.hadm_id
    left join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = d.subject_id
    where d.hadm_id in (select hadm_id from {{ ref('int_ehrsql2024__mimic_iv__admissions') }})

)

select
    file_row,
    source_key, subject_id, hadm_id, icd_version, icd_code, charttime
from shifted as s
where exists (
    select 1 from {{ ref('int_ehrsql2024__mimic_iv__d_icd_diagnoses') }} as codes
    where codes.icd_version = s.icd_version and codes.icd_code = s.icd_code
)
  and charttime is not null
  and charttime >= {{ ehrsql2024_start() }}
