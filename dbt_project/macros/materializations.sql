{#-
  Tables and views replaced in place: `create or replace` in the model's own transaction. dbt's own materializations
  build a temporary relation, rename the existing one away, rename the new one in and drop the old one: three extra
  statements per model, and each rename or drop is a macro call for which dbt rebuilds its whole macro namespace. In
  a demo build's profiles run that was a quarter of dbt's own (Python) time. Readers never see a half-built model
  either way: DuckDB replaces it at commit.
  A Python model's table is dropped and created anew (dbt-duckdb's own code writes it). What these do not support,
  the project does not use: contracts, constraints, indexes, grants, persisted docs, DuckLake tables.
-#}

{% materialization table, adapter="duckdb", supported_languages=["sql", "python"] %}
  {%- set existing = load_cached_relation(this) -%}
  {%- set target = this.incorporate(type='table') -%}
  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}
  {% if model.language == 'python' %}  {#- run from the materialization itself: dbt checks who runs a Python model -#}
    {{ adapter.drop_relation(existing) if existing is not none }}
    {% call statement('main', language='python') -%}
      {{ create_table_as(False, target, compiled_code, 'python') }}
    {%- endcall %}
  {% else %}
    {% call statement('main') -%}
      {{ ehrbench_create_or_replace(existing, target) }}
    {%- endcall %}
  {% endif %}
  {{ run_hooks(post_hooks, inside_transaction=True) }}
  {{ adapter.commit() }}
  {{ run_hooks(post_hooks, inside_transaction=False) }}
  {{ return({'relations': [target]}) }}
{% endmaterialization %}

{% materialization view, adapter="duckdb" %}
  {%- set existing = load_cached_relation(this) -%}
  {%- set target = this.incorporate(type='view') -%}
  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}
  {% call statement('main') -%}
    {{ ehrbench_create_or_replace(existing, target) }}
  {%- endcall %}
  {{ run_hooks(post_hooks, inside_transaction=True) }}
  {{ adapter.commit() }}
  {{ run_hooks(post_hooks, inside_transaction=False) }}
  {{ return({'relations': [target]}) }}
{% endmaterialization %}

{% macro ehrbench_create_or_replace(existing, target) %}
  {%- if existing is not none and existing.type != target.type -%}
    drop {{ existing.type }} {{ existing }};  {#- a model that changed kind: `create or replace` keeps the kind -#}
  {%- endif %}
  create or replace {{ target.type }} {{ target }} as (
    {{ compiled_code }}
  )
{% endmacro %}
