{{ config(alias='radiology') }}
-- MIMIC-IV-Note's radiology notes of the build's patients, times shifted like the databases' (macros/mimic_iv_note.sql).
{{ mimic_iv_note_shifted('radiology') }}
order by subject_id, charttime, note_seq, note_id
