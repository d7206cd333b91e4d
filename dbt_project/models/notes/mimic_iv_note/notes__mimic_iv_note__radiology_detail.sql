{{ config(alias='radiology_detail') }}
{{ mimic_iv_note_details('radiology') }}
order by note_id, field_name, field_ordinal
