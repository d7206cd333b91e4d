-- Every MIMIC-IV row as MEDS events in the raw timeline (docs/benchmarks.md#meds-export), following the MEDS-for-MIMIC-IV
-- ETL's event configuration (Medical-Event-Data-Standard/MIMIC_IV_MEDS configs/event_configs.yaml and pre_MEDS.py):
-- one block per event kind below, its code composed as there. A code component written there without `?? 'UNK'` is
-- null-propagating here too (`||`), and an event whose code or (non-static) time is null is dropped, as MEDS-Extract
-- drops it. Raw tables not in the ETL (prescriptions, microbiologyevents, ...) are not exported. The rows are the raw
-- tables', not staging's: the ETL reads the CSVs' values untrimmed (a lab unit ' ' stays in the code), and the codes
-- must be its codes.
with admissions as (

    select * from {{ source('mimic_iv', 'admissions') }}

),

events as (

    -- hosp/patients (pre_MEDS fix_static_data): gender (static), birth at the start of anchor_year - anchor_age,
    -- death at the earliest admission deathtime, else dod
    select p.subject_id, null::timestamp as time, 'GENDER//' || p.gender as code, null::double as numeric_value,
           null::varchar as text_value, null::bigint as hadm_id, null::bigint as icustay_id
    from {{ source('mimic_iv', 'patients') }} as p
    union all
    select subject_id, make_timestamp(anchor_year - anchor_age, 1, 1, 0, 0, 0), 'MEDS_BIRTH', null, null, null, null
    from {{ source('mimic_iv', 'patients') }}
    union all
    select p.subject_id, coalesce(d.deathtime, cast(p.dod as timestamp)), 'MEDS_DEATH', null, null, null, null
    from {{ source('mimic_iv', 'patients') }} as p
    left join (select subject_id, min(deathtime) as deathtime from admissions group by subject_id) as d
        on d.subject_id = p.subject_id

    -- hosp/admissions
    union all
    select subject_id, edregtime, 'ED_REGISTRATION', null, null, hadm_id, null from admissions
    union all
    select subject_id, edouttime, 'ED_OUT', null, null, hadm_id, null from admissions
    union all
    select subject_id, admittime,
           'HOSPITAL_ADMISSION//' || admission_type || '//' || coalesce(admission_location, 'UNK'),
           null, null, hadm_id, null
    from admissions
    union all
    select subject_id, dischtime, 'HOSPITAL_DISCHARGE//' || coalesce(discharge_location, 'UNK'), null, null,
           hadm_id, null
    from admissions

    -- hosp/diagnoses_icd, hosp/procedures_icd, hosp/drgcodes: at the admission's discharge time
    union all
    select d.subject_id, a.dischtime, 'DIAGNOSIS//ICD//' || d.icd_version || '//' || d.icd_code, null, null,
           d.hadm_id, null
    from {{ source('mimic_iv', 'diagnoses_icd') }} as d left join admissions as a on a.hadm_id = d.hadm_id
    union all
    select p.subject_id, a.dischtime, 'PROCEDURE//ICD//' || p.icd_version || '//' || p.icd_code, null, null,
           p.hadm_id, null
    from {{ source('mimic_iv', 'procedures_icd') }} as p left join admissions as a on a.hadm_id = p.hadm_id
    union all
    select g.subject_id, a.dischtime,
           'DRG//' || g.drg_type || '//' || g.drg_code || '//' || coalesce(g.description, 'UNK'), null, null,
           g.hadm_id, null
    from {{ source('mimic_iv', 'drgcodes') }} as g left join admissions as a on a.hadm_id = g.hadm_id

    -- hosp/emar, hosp/pharmacy
    union all
    select subject_id, charttime,
           'MEDICATION//' || coalesce(medication, 'UNK') || '//' || coalesce(event_txt, 'UNK'), null, null,
           hadm_id, null
    from {{ source('mimic_iv', 'emar') }}
    union all
    select subject_id, starttime, 'MEDICATION//START//' || coalesce(medication, 'UNK'), null, null, hadm_id, null
    from {{ source('mimic_iv', 'pharmacy') }}
    union all
    select subject_id, stoptime, 'MEDICATION//STOP//' || coalesce(medication, 'UNK'), null, null, hadm_id, null
    from {{ source('mimic_iv', 'pharmacy') }}

    -- hosp/hcpcsevents, hosp/omr (dates at midnight)
    union all
    select subject_id, cast(chartdate as timestamp), 'HCPCS//' || coalesce(short_description, 'UNK'), null, null,
           hadm_id, null
    from {{ source('mimic_iv', 'hcpcsevents') }}
    union all
    select subject_id, cast(chartdate as timestamp), result_name, null, result_value, null, null
    from {{ source('mimic_iv', 'omr') }}

    -- hosp/labevents: the specimen at charttime, the result (value) at storetime
    union all
    select subject_id, charttime, 'LAB//SPECIMEN_COLLECTED//' || itemid, null, null, hadm_id, null
    from {{ source('mimic_iv', 'labevents') }}
    union all
    select subject_id, storetime, 'LAB//RESULT//' || itemid || '//' || coalesce(valueuom, 'UNK'), valuenum, value,
           hadm_id, null
    from {{ source('mimic_iv', 'labevents') }}

    -- hosp/transfers, icu/icustays
    union all
    select subject_id, intime, 'TRANSFER_TO//' || eventtype || '//' || coalesce(careunit, 'UNK'), null, null,
           hadm_id, null
    from {{ source('mimic_iv', 'transfers') }}
    union all
    select subject_id, intime, 'ICU_ADMISSION//' || first_careunit, null, null, hadm_id, stay_id
    from {{ source('mimic_iv', 'icustays') }}
    union all
    select subject_id, outtime, 'ICU_DISCHARGE//' || last_careunit, null, null, hadm_id, stay_id
    from {{ source('mimic_iv', 'icustays') }}

    -- icu/chartevents (coded LAB// as in the ETL), icu/procedureevents, icu/inputevents, icu/outputevents
    union all
    select subject_id, charttime, 'LAB//' || itemid || '//' || coalesce(valueuom, 'UNK'), valuenum, value,
           hadm_id, stay_id
    from {{ source('mimic_iv', 'chartevents') }}
    union all
    select subject_id, starttime, 'PROCEDURE//START//' || itemid, null, null, hadm_id, stay_id
    from {{ source('mimic_iv', 'procedureevents') }}
    union all
    select subject_id, endtime, 'PROCEDURE//END//' || itemid, null, null, hadm_id, stay_id
    from {{ source('mimic_iv', 'procedureevents') }}
    union all
    select subject_id, starttime, 'INFUSION_START//' || itemid, rate, null, hadm_id, stay_id
    from {{ source('mimic_iv', 'inputevents') }}
    union all
    select subject_id, endtime, 'INFUSION_END//' || itemid, amount, null, hadm_id, stay_id
    from {{ source('mimic_iv', 'inputevents') }}
    union all
    select subject_id, starttime, 'SUBJECT_WEIGHT_AT_INFUSION//KG', patientweight, null, null, null
    from {{ source('mimic_iv', 'inputevents') }}
    union all
    select subject_id, charttime, 'SUBJECT_FLUID_OUTPUT//' || itemid || '//' || coalesce(valueuom, 'UNK'), value,
           null, hadm_id, stay_id
    from {{ source('mimic_iv', 'outputevents') }}

)

select
    cast(subject_id as bigint) as subject_id,
    time,
    code,
    cast(numeric_value as float) as numeric_value,
    text_value,
    hadm_id,
    icustay_id
from events
where code is not null and (time is not null or code like 'GENDER//%')
