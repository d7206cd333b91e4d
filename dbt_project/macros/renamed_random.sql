{#- Profile `renamed_random`: the `renamed` schema under a per-build seeded rename (docs/benchmarks.md#seeded-random-renames, our extension).
    The map is drawn in Python (ehrbench.renaming.draw_random_rename, recorded in the build's hidden files) and
    reaches dbt as var('renamed_random') = {<database>: {<renamed table>: {name, columns: {old: new}}}}. -#}

{%- macro _renamed_random_map(database, table_name) -%}
    {%- set table_map = var('renamed_random', {}).get(database, {}).get(table_name) -%}
    {%- if table_map is none and execute -%}
        {{ exceptions.raise_compiler_error("renamed_random: no rename drawn for " ~ database ~ "." ~ table_name
            ~ "; build through ehrbench (it passes var renamed_random), or exclude the renamed_random models") }}
    {%- endif -%}
    {{ return(table_map) }}
{%- endmacro %}

{#- The drawn name of a renamed table (the renamed name while dbt only parses). -#}
{% macro renamed_random_table_name(database, table_name) -%}
    {%- set table_map = _renamed_random_map(database, table_name) -%}
    {{ return(table_map['name'] if table_map else table_name) }}
{%- endmacro %}

{#- Every column of the renamed table under its drawn name; `table_name_columns` hold names of tables
    (cost event types, item types), whose values get the drawn table names too. -#}
{% macro renamed_random_select(database, table_name, table_name_columns=[]) %}
    {%- set table_map = _renamed_random_map(database, table_name) -%}
    {%- set tables = var('renamed_random', {}).get(database, {}) -%}
select
{%- if table_map %}
{%- for old, new in table_map['columns'].items() %}
    {% if old in table_name_columns -%}
    case {{ old }}{% for old_table, drawn in tables.items() %} when '{{ old_table }}' then '{{ drawn['name'] }}'{% endfor %} end
    {%- else %}{{ old }}{% endif %} as {{ new }}{{ "," if not loop.last }}
{%- endfor %}
{%- else %} *
{%- endif %}
from {{ ref('renamed__' ~ database ~ '__' ~ table_name) }}
{% endmacro %}
