{{ config(alias='discharge') }}
-- MIMIC-IV-Note's discharge notes of the build's patients, times shifted like the databases' (macros/mimic_iv_note.sql).
{{ mimic_iv_note_shifted('discharge') }}
order by subject_id, charttime, note_seq, note_id
