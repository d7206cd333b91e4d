{{ config(alias='discharge') }}
-- SYNTHETIC discharge summaries, one per admission with a discharge time, in MIMIC-IV-Note 2.2's discharge table
-- layout (note_id <subject>-DS-<seq>, note_type 'DS', note_seq per patient in admission order, charttime = the
-- discharge time's date at midnight, text in the sections of a MIMIC-IV discharge summary). For tests and demos
-- without credentialed notes (docs/benchmarks.md#synthetic-discharge-summaries): every sentence is written from the
-- admission's structured rows, so every fact in a note can be checked against the database, and the text says it is
-- synthetic on its first line. The facts come from int_notes__mimic_iv__admission_facts.
select
    a.subject_id || '-DS-' || a.note_seq as note_id,
    a.subject_id,
    a.hadm_id,
    'DS' as note_type,
    a.note_seq,
    cast(cast(a.dischtime as date) as timestamp) as charttime,
    a.dischtime as storetime,
    concat_ws(chr(10),
        'SYNTHETIC NOTE: written by ehrbench from structured MIMIC-IV rows; not a clinical document.',
        ' ',
        'Name:  ___                     Unit No:   ___',
        ' ',
        'Admission Date:  ' || strftime(a.admittime, '%Y-%m-%d') || '              Discharge Date:   '
            || strftime(a.dischtime, '%Y-%m-%d'),
        ' ',
        'Sex:   ' || coalesce(a.gender, '___'),
        ' ',
        'Chief Complaint:',
        coalesce(a.principal_diagnosis, 'Not recorded.'),
        ' ',
        'Major Surgical or Invasive Procedure:',
        coalesce(a.procedures_listed, 'None'),
        ' ',
        'History of Present Illness:',
        'Admitted as ' || coalesce(lower(a.admission_type), 'an unknown type of admission') || ' from '
            || coalesce(lower(a.admission_location), 'an unknown location') || '.',
        ' ',
        'Pertinent Results:',
        coalesce(a.abnormal_labs_listed, 'No abnormal laboratory results.'),
        ' ',
        'Brief Hospital Course:',
        'Hospitalized for ' || a.length_of_stay_days || ' days. ' || coalesce(a.icu_listed, 'No ICU stay.'),
        ' ',
        'Medications Given During Admission:',
        coalesce(a.medications_listed, 'None'),
        ' ',
        'Discharge Disposition:',
        coalesce(a.discharge_location, 'Unknown'),
        ' ',
        'Discharge Diagnosis:',
        coalesce(a.diagnoses_listed, 'Not recorded.'),
        ' ',
        'Discharge Instructions:',
        'Please follow up with your doctor as instructed.',
        ' ',
        'Followup Instructions:',
        '___'
    ) as text
from {{ ref('int_notes__mimic_iv__admission_facts') }} as a
