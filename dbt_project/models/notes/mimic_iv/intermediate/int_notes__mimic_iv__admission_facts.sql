-- One row per admission with a discharge time: the facts a synthetic discharge summary states
-- (notes__mimic_iv__discharge writes them out; ehrbench.noteqa.generation asks about them). Lists are newline-joined
-- in the order the note gives them.
with admissions as (

    select
        a.subject_id,
        a.hadm_id,
        a.admittime,
        a.dischtime,
        a.admission_type,
        a.admission_location,
        a.discharge_location,
        p.gender,
        row_number() over (partition by a.subject_id order by a.admittime, a.hadm_id) as note_seq
    from {{ ref('stg_mimic_iv__admissions') }} as a
    inner join {{ ref('stg_mimic_iv__patients') }} as p using (subject_id)
    where a.dischtime is not null

),

diagnoses as (

    select
        d.hadm_id,
        string_agg(d.seq_num || '. ' || coalesce(t.long_title, 'ICD-' || d.icd_version || ' ' || d.icd_code), chr(10)
                   order by d.seq_num) as listed,
        arg_min(coalesce(t.long_title, 'ICD-' || d.icd_version || ' ' || d.icd_code), d.seq_num) as principal
    from {{ ref('stg_mimic_iv__diagnoses_icd') }} as d
    left join {{ ref('stg_mimic_iv__d_icd_diagnoses') }} as t using (icd_code, icd_version)
    group by d.hadm_id

),

procedures as (

    select
        p.hadm_id,
        string_agg('- ' || coalesce(t.long_title, 'ICD-' || p.icd_version || ' ' || p.icd_code)
                   || ' (' || strftime(p.chartdate, '%Y-%m-%d') || ')', chr(10) order by p.seq_num) as listed
    from {{ ref('stg_mimic_iv__procedures_icd') }} as p
    left join {{ ref('stg_mimic_iv__d_icd_procedures') }} as t using (icd_code, icd_version)
    group by p.hadm_id

),

medications as (

    select
        hadm_id,
        string_agg(position || '. ' || drug || coalesce(' ' || dose_val_rx || ' ' || dose_unit_rx, '')
                   || coalesce(' ' || route, ''), chr(10) order by position) as listed
    from (
        select
            hadm_id, drug, dose_val_rx, dose_unit_rx, route,
            row_number() over (partition by hadm_id order by min_start, drug) as position
        from (
            select hadm_id, drug, dose_val_rx, dose_unit_rx, route, min(starttime) as min_start
            from {{ ref('stg_mimic_iv__prescriptions') }}
            where drug is not null
            group by all
        )
    )
    group by hadm_id

),

abnormal_labs as (

    -- the admission's abnormal results, first ten by time
    select
        hadm_id,
        string_agg(strftime(charttime, '%Y-%m-%d %H:%M') || ' ' || label || ' ' || value
                   || coalesce(' ' || valueuom, '') || ' (abnormal)', chr(10) order by position) as listed,
        arg_min(label, position) as first_label
    from (
        select l.hadm_id, l.charttime, i.label, l.value, l.valueuom,
               row_number() over (partition by l.hadm_id order by l.charttime, i.label, l.labevent_id) as position
        from {{ ref('stg_mimic_iv__labevents') }} as l
        inner join {{ ref('stg_mimic_iv__d_labitems') }} as i using (itemid)
        where l.hadm_id is not null and l.flag = 'abnormal' and l.value is not null
    )
    where position <= 10
    group by hadm_id

),

icu as (

    select
        hadm_id,
        string_agg('ICU stay in ' || first_careunit || ' from ' || strftime(intime, '%Y-%m-%d')
                   || ' to ' || coalesce(strftime(outtime, '%Y-%m-%d'), 'an unknown date') || '.', ' '
                   order by intime) as listed
    from {{ ref('stg_mimic_iv__icustays') }}
    group by hadm_id

)

select
    a.subject_id,
    a.hadm_id,
    cast(a.note_seq as integer) as note_seq,
    a.admittime,
    a.dischtime,
    a.gender,
    a.admission_type,
    a.admission_location,
    a.discharge_location,
    cast(date_diff('day', a.admittime, a.dischtime) as integer) as length_of_stay_days,
    d.principal as principal_diagnosis,
    d.listed as diagnoses_listed,
    p.listed as procedures_listed,
    l.first_label as first_abnormal_lab,
    l.listed as abnormal_labs_listed,
    icu.listed as icu_listed,
    m.listed as medications_listed
from admissions as a
left join diagnoses as d using (hadm_id)
left join procedures as p using (hadm_id)
left join medications as m using (hadm_id)
left join abnormal_labs as l using (hadm_id)
left join icu using (hadm_id)
