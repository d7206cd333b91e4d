{#- The database FHIR-AgentBench runs EHRSQL-2024's gold SQL on (docs/benchmarks.md#fhir-agentbench-ground-truth-rules):
    one raw MIMIC-IV table with every row and column at raw times, as its create_db.py loads the demo CSVs, with
    - row_id: the row's 0-based position in the raw file;
    - text lower-cased and trimmed, like its "processed" database, so that EHRSQL's lower-case literals match (its
      pipeline instead turns each literal back into the raw value before running on raw text);
    - raw_<column>: the raw text of the columns a FHIR resource id is made of (`raw_columns`). -#}
{% macro fhir_agentbench_table(table, raw_columns=[], extra_columns=[]) -%}
{%- set relation = source('mimic_iv', table) -%}
{%- set columns = adapter.get_columns_in_relation(relation) if execute else [] -%}
select
    row_number() over () - 1 as row_id,
    {%- for column in columns %}
    {% if column.is_string() %}lower(trim({{ adapter.quote(column.name) }})){% else %}{{ adapter.quote(column.name) }}{% endif %} as {{ adapter.quote(column.name) }},
    {%- endfor %}
    {%- for name in raw_columns %}
    {{ adapter.quote(name) }} as {{ adapter.quote('raw_' ~ name) }},
    {%- endfor %}
    {%- for expression in extra_columns %}
    {{ expression }},
    {%- endfor %}
from {{ relation }}
{%- endmacro %}
