{{ config(alias='discharge_detail') }}
{{ mimic_iv_note_details('discharge') }}
order by note_id, field_name, field_ordinal
