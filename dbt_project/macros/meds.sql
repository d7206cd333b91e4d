{#- A code with a dot inserted after `position` characters when it is longer (MIMIC_IV_MEDS pre_MEDS.py add_dot). -#}
{% macro meds_dotted(code, position) -%}
    case when length({{ code }}) > ({{ position }})
         then substr({{ code }}, 1, {{ position }}) || '.' || substr({{ code }}, ({{ position }}) + 1)
         else {{ code }} end
{%- endmacro %}

{#- A raw table read from the file ingest verified (ingest_meta.loaded_files), every value as text, with a quoted
    empty string ("") kept apart from an empty field (null), as the MEDS ETLs read the CSV files: eICU writes a missing
    string as "" and a NULL as nothing, and its ETL codes the two differently. The typed raw tables cannot tell them
    apart (the ingest reads both as null, as the EHRSQL preprocessing does). An optional table that was absent is the
    raw source's empty table. -#}
{% macro meds_raw_file(dataset, table) -%}
    {%- set path = none -%}
    {%- if execute -%}
        {%- set found = run_query("select path from ingest_meta.loaded_files where schema_name = 'raw_" ~ dataset
                                  ~ "' and table_name = '" ~ table ~ "'") -%}
        {%- if found.rows | length > 0 -%}{%- set path = found.rows[0][0] -%}{%- endif -%}
    {%- endif -%}
    {%- if path -%}
        read_csv('{{ path | replace("'", "''") }}', header = true, all_varchar = true, allow_quoted_nulls = false)
    {%- else -%}
        (select * from {{ source(dataset, table) }} where false)
    {%- endif -%}
{%- endmacro %}

{#- The eICU ETL's numbers parsed from text: Rust's f64 grammar (its regex_extract guard), else null. -#}
{% macro meds_f64(column) -%}
    case when regexp_full_match({{ column }},
        '[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN])')
         then cast({{ column }} as double) end
{%- endmacro %}

{#- One event kind of the eICU MEDS export (models/meds/eicu/): its block (table/event, as the ETL's source_block),
    rows, time, code, values, and the ETL's extra columns (the rest null), which its de-duplication compares. -#}
{% macro meds_eicu_event(block, rows, time, code, numeric='null', text='null', static=false) -%}
    {%- set extras = ['hadm_id', 'icustay_id', 'ward_id', 'admission_dx_id', 'diagnosis_priority', 'drug_rate',
                      'infusion_rate', 'drug_amount', 'volume_of_fluid', 'dosage', 'medication_id', 'lab_type_id',
                      'vital_id'] -%}
    select
        '{{ block }}' as block,
        cast(subject_id as bigint) as subject_id,
        {{ 'null::timestamp' if static else time }} as time,
        {{ code }} as code,
        try_cast({{ numeric }} as double) as numeric_value,
        cast({{ text }} as varchar) as text_value,
        {%- for extra in extras %}
        cast({{ kwargs.get(extra, 'null') }} as varchar) as {{ extra }},
        {%- endfor %}
        {{ 'true' if static else 'false' }} as is_static
    from {{ rows }}
{%- endmacro %}
