{{ config(alias='diagnoses') }}
-- Billed diagnoses with their ICD title (the evidence of sex-specific conditions, among others).
select
    d.subject_id as patient_id,
    d.hadm_id as admission_id,
    d.seq_num as sequence,
    d.icd_code,
    d.icd_version,
    t.long_title as description
from {{ ref('stg_mimic_iv__diagnoses_icd') }} as d
inner join {{ ref('int_dq__mimic_iv__scope') }} as s using (subject_id)
left join {{ ref('stg_mimic_iv__d_icd_diagnoses') }} as t using (icd_code, icd_version)
