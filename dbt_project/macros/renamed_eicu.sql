{#-
    Helpers of the renamed eICU database (EHR-ChatQA's eICU database, docs/benchmarks.md#ehr-chatqa-eicu-database).
    It reads the time shift of the `ehrsql_eicu` var group (ehrsql_eicu_var) and shares the EHRSQL eICU helpers
    (macros/ehrsql_eicu.sql); what differs from the EHRSQL (2022) rules lives here.
-#}

{#- Keeps an event time only up to the current time; otherwise NULL. No lower bound: EHR-ChatQA keeps events
    before the start year (the published adjust_time only compares with the current time). -#}
{% macro renamed_eicu_up_to_now(time_expression) -%}
    case
        when {{ time_expression }} <= {{ ehrsql_eicu_current_time() }}
            then {{ time_expression }}
    end
{%- endmacro %}

{#- One staged eICU table with `file_row`, the 1-based row of its raw CSV file (the published code works in file
    row order: renumbered ids, the "most common path" tie-break, the cost's first appearances). The staging view
    reads the raw table in load order, which is the file's (as the MIMIC-IV profiles number their rows). -#}
{% macro renamed_eicu_file_rows(staging_model) -%}
    select *, row_number() over () as file_row
    from {{ ref(staging_model) }}
{%- endmacro %}

{#- An event time of the renamed eICU database: the unit admit time of the stay + an offset in minutes, kept up to
    the current time. -#}
{% macro renamed_eicu_event_time(unitadmittime, offset) -%}
    {{ renamed_eicu_up_to_now(ehrsql_eicu_offset_time(unitadmittime, offset)) }}
{%- endmacro %}
