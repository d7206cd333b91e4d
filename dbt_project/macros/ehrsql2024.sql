{#- Helpers of the ehrsql2024 profile (MIMIC-IV -> EHRSQL-2024, DESIGN §5.1).

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
