{#- MIMIC-IV-Note's notes (`discharge` or `radiology`) of the build's patients and admissions, in MIMIC-IV-Note's
    columns, with charttime and storetime moved by the patient's offset of the shifted profiles
    (int_ehrsql2024__mimic_iv__subject_offsets, the shift of the ehrsql2024 and renamed databases), so that a note
    lines up with its admission in those databases. A note of a patient or admission the build's MIMIC-IV lacks is
    left out (a demo build has 100 of the full release's patients). Unlike the databases, a time after the profile's
    current time is kept: a note question asks over a patient's notes, not about 'now'. The text is unchanged
    (MIMIC-IV-Note writes every date in it as ___). -#}
{% macro mimic_iv_note_shifted(table_name) %}
    select
        n.note_id,
        n.subject_id,
        n.hadm_id,
        n.note_type,
        n.note_seq,
        n.charttime + to_days(cast(o.offset_days as integer)) as charttime,
        n.storetime + to_days(cast(o.offset_days as integer)) as storetime,
        n.text
    from {{ ref('stg_mimic_iv_note__' ~ table_name) }} as n
    join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = n.subject_id
    {%- if table_name == 'discharge' %}
    join {{ ref('stg_mimic_iv__admissions') }} as a on a.hadm_id = n.hadm_id and a.subject_id = n.subject_id
    {%- else %}
    left join {{ ref('stg_mimic_iv__admissions') }} as a on a.hadm_id = n.hadm_id and a.subject_id = n.subject_id
    where n.hadm_id is null or a.hadm_id is not null
    {%- endif %}
{% endmacro %}

{#- The detail rows (`discharge_detail`, `radiology_detail`) of the notes kept by mimic_iv_note_shifted. -#}
{% macro mimic_iv_note_details(table_name) %}
    select d.note_id, d.subject_id, d.field_name, d.field_value, d.field_ordinal
    from {{ ref('stg_mimic_iv_note__' ~ table_name ~ '_detail') }} as d
    where d.note_id in (select note_id from {{ ref('notes__mimic_iv_note__' ~ table_name) }})
{% endmacro %}
