{#-
    Helpers of both eICU databases (macros/eicu_database.sql): the `ehrsql_eicu` var group and the published
    text, path and label rules (docs/benchmarks.md#ehrsql-eicu-database).
    Parameters come from the one var dict `ehrsql_eicu` (dbt_project.yml; presets in
    src/ehrbench/profiles.py). A --vars dict replaces the project's dict as a whole, so every key
    must be given: a missing key is a compile error rather than a silent default.
-#}
{% macro ehrsql_eicu_var(name) -%}
    {%- set params = var('ehrsql_eicu') -%}
    {%- if name not in params -%}
        {{ exceptions.raise_compiler_error("var ehrsql_eicu lacks '" ~ name ~ "' (expected keys: current_time, start_year, time_span, seed, num_patients, current_ratio, deidentify); pass the whole dict, e.g. from ehrbench.profiles.eicu_vars()") }}
    {%- endif -%}
    {{ return(params[name]) }}
{%- endmacro %}

{#- The profile's "now" as a TIMESTAMP literal. -#}
{% macro ehrsql_eicu_current_time() -%}
    timestamp '{{ ehrsql_eicu_var("current_time") }}'
{%- endmacro %}

{#- An eICU offset (minutes from unit admission) turned into a shifted time. -#}
{% macro ehrsql_eicu_offset_time(unitadmittime, offset) -%}
    ({{ unitadmittime }} + to_minutes(cast({{ offset }} as bigint)))
{%- endmacro %}

{#- Published read_csv: every string cell lower-cased and stripped. -#}
{% macro ehrsql_eicu_text(column_name) -%}
    lower(trim({{ column_name }}))
{%- endmacro %}

{#-
    Published diagnosis/treatment path rule. A path is split on '|'; levels 1–2 are its upper path,
    levels 3–4 its lower path. For each lower path only the most common upper path is kept (ties:
    the upper path seen first in the file); the stored name joins levels 3 and 4
    with ' - ' (level 3 alone for a 3-level path). Rows of other upper paths are dropped.
    Returns the source CTE's columns (minus the path helpers) plus `name`.
-#}
{% macro ehrsql_eicu_named_paths(source_cte, id_column, path_column) -%}
    with split_paths as (
        select *, string_split({{ path_column }}, '|') as path_parts
        from {{ source_cte }}
    ),
    levelled as (
        select
            *,
            array_to_string(path_parts[1:2], '|') as upper_path,
            array_to_string(path_parts[3:4], '|') as lower_path
        from split_paths
    ),
    counted as (
        select lower_path, upper_path, count(*) as n_rows, min({{ id_column }}) as first_id
        from levelled
        group by lower_path, upper_path
    ),
    modal as (
        select lower_path, upper_path
        from counted
        qualify row_number() over (partition by lower_path order by n_rows desc, first_id) = 1
    )
    select
        levelled.* exclude (path_parts, upper_path, lower_path),
        case
            when len(levelled.path_parts) > 3 then levelled.path_parts[3] || ' - ' || levelled.path_parts[4]
            else levelled.path_parts[3]
        end as name
    from levelled
    inner join modal
        on levelled.lower_path = modal.lower_path
       and levelled.upper_path = modal.upper_path
{%- endmacro %}

{#- Python's `" ".join(x.split()[:-1]) if x.split()[-1] == word else x`. -#}
{% macro ehrsql_eicu_drop_last_word(expression, word) -%}
    case
        when list_last(string_split_regex(trim({{ expression }}), '\s+')) = '{{ word }}'
            then array_to_string(list_slice(string_split_regex(trim({{ expression }}), '\s+'), 1, -2), ' ')
        else {{ expression }}
    end
{%- endmacro %}

{#- Lineage of an eICU profile (hidden from agents): one row per benchmark row, table_name = the profile's table,
    row_id = the row's id there (ids are renumbered 0..n-1), source_table = the eICU table, source_key = the
    eICU id of the source row (JSON), source_row = its 1-based row in the raw file (the published preprocessing
    works in file row order). A de-identified row's source is its own row, not the row its shuffled values came
    from. Same columns as the MIMIC-IV lineage. Cost rows are synthetic (eventtype/eventid lead to the event). -#}
{% macro eicu_lineage(profile) %}
    {%- set tables = [
        ('patient', 'patientunitstayid', 'patientunitstayid'),
        ('diagnosis', 'diagnosisid', 'source_diagnosisid'),
        ('treatment', 'treatmentid', 'source_treatmentid'),
        ('lab', 'labid', 'source_labid'),
        ('medication', 'medicationid', 'source_medicationid'),
        ('allergy', 'allergyid', 'source_allergyid'),
        ('intakeoutput', 'intakeoutputid', 'source_intakeoutputid'),
        ('microlab', 'microlabid', 'source_microlabid'),
        ('vitalperiodic', 'vitalperiodicid', 'source_vitalperiodicid'),
        ('hospital', 'hospitalid', 'hospitalid'),
    ] -%}
    {%- for table_name, id_column, source_id in tables %}
select
    {% if profile == 'renamed' -%}
    {{ renamed_table_name('eicu', "'" ~ table_name ~ "'") }}
    {%- else -%}
    '{{ table_name }}'
    {%- endif %} as table_name,
    cast({{ id_column }} as bigint) as row_id,
    '{{ table_name }}' as source_table,
    cast(file_row as bigint) as source_row,
    to_json(struct_pack({{ id_column }} := {{ source_id }})) as source_key
from {{ ref(('int_renamed__eicu__' if profile == 'renamed' else 'int_ehrsql_eicu__eicu__') ~ table_name) }}
{{ "union all" if not loop.last }}
    {%- endfor %}
{% endmacro %}
