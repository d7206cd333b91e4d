{#- Helpers of the ehrsql2024 profile (MIMIC-IV -> EHRSQL-2024, docs/benchmarks.md#ehrsql-2024-database).

    File order: the published build numbers rows (row_id, "first appearance", "first seen") in CSV
    order. The models take it as `row_number() over ()` directly on a staging view (no filter or join
    before it): DuckDB runs an empty OVER () as a streaming window that keeps the scan order, which is
    the insertion order of the raw table, i.e. the file order. -#}

{#- One build parameter from the `ehrsql2024` var dict (current_time, start_year, time_span, seed, ...). -#}
{% macro ehrsql2024_param(name) -%}
    {{ return(var('ehrsql2024')[name]) }}
{%- endmacro %}

{#- A text cell as the published build reads it: pandas' default NA tokens become NULL, then the value
    is lower-cased and stripped of surrounding whitespace. -#}
{% macro ehrsql2024_text(column_name) -%}
    case
        when {{ column_name }} in ('#N/A', '#N/A N/A', '#NA', '-1.#IND', '-1.#QNAN', '-NaN', '-nan', '1.#IND',
                                   '1.#QNAN', '<NA>', 'N/A', 'NA', 'NULL', 'NaN', 'None', 'n/a', 'nan', 'null')
            then null
        else trim(lower({{ column_name }}), chr(32) || chr(9) || chr(10) || chr(11) || chr(12) || chr(13))
    end
{%- endmacro %}

{#- A time moved by the patient's offset (whole days); NULL when the result lies after the current time
    or the patient has no offset. -#}
{% macro ehrsql2024_shift(time_expr, offset_days) -%}
    case
        when cast({{ time_expr }} as timestamp) + to_days(cast({{ offset_days }} as integer))
             <= timestamp '{{ ehrsql2024_param("current_time") }}'
            then cast({{ time_expr }} as timestamp) + to_days(cast({{ offset_days }} as integer))
    end
{%- endmacro %}

{#- First instant of the start year: shifted events before it are dropped. -#}
{% macro ehrsql2024_start() -%}
    timestamp '{{ ehrsql2024_param("start_year") }}-01-01 00:00:00'
{%- endmacro %}

{#- A text cell as it lands in the published SQLite file: the build writes each table to CSV and reads
    it back with pandas before loading, so a cell that is '' or one of pandas' lower-case NA tokens at
    that point becomes NULL (after every filter has run: the row stays). -#}
{% macro ehrsql2024_loaded(column_name) -%}
    case when {{ column_name }} in ('', '-nan', 'nan', 'null', 'n/a') then null else {{ column_name }} end
{%- endmacro %}

{#- An ICD code in the EHRSQL-2024 form, 'icd<version>|<code>' (lower-cased code). -#}
{% macro ehrsql2024_icd_key(version_expr, code_expr) -%}
    'icd' || cast({{ version_expr }} as varchar) || '|' || {{ code_expr }}
{%- endmacro %}

{#- An ICD dictionary (d_icd_diagnoses / d_icd_procedures) before the profiles format it: rows whose title is
    in `dropped_titles` go; then the first row of a duplicated (version, code), then of a duplicated title, is
    kept. The profiles write the code as 'icd<version>|<code>' (ehrsql2024) or as code + version (renamed). -#}
{% macro ehrsql2024_icd_dictionary(staging_model, dropped_titles=[]) %}
with codes as (

    select
        row_number() over () as file_row,
        {{ mimic_iv_source_key(icd_code='icd_code', icd_version='icd_version') }} as source_key,
        icd_version,
        {{ ehrsql2024_text('icd_code') }} as icd_code,
        {{ ehrsql2024_text('long_title') }} as long_title
    from {{ ref(staging_model) }}

),

kept as (

    select * from codes
    {% if dropped_titles %}
    where long_title is null
       or long_title not in ({% for title in dropped_titles %}'{{ title }}'{{ ", " if not loop.last }}{% endfor %})
    {% endif %}

),

unique_codes as (

    select * from kept
    where icd_version is not null and icd_code is not null and long_title is not null
    qualify row_number() over (partition by icd_version, icd_code order by file_row) = 1

),

unique_titles as (

    select * from unique_codes
    qualify row_number() over (partition by long_title order by file_row) = 1

)

select
    file_row,
    source_key,
    icd_version,
    icd_code,
    {{ ehrsql2024_loaded('long_title') }} as long_title
from unique_titles
{% endmacro %}
