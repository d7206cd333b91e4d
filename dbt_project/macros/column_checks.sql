{#-
    One table test of the generic test `column_checks`: a query giving one row (test, NULL, failing_rows) when the test
    fails on `model`, none when it passes. The failing rows are counted as the generic test of that name
    (tests/generic/) returns them: not_empty 1 for an empty model; row_count_compared 1 when the row count is not
    `comparison` (=, >=, <=) that of `compare_model`; unique_combination_of_columns one per repeated combination
    (NULL keys grouped together).
-#}
{% macro model_check_sql(model, test, args) -%}
select '{{ test }}' as test, cast(null as varchar) as column_name, count(*) as failing_rows
from (
{%- if test == 'not_empty' %}
    select 1 from (select count(*) as n_rows from {{ model }}) as counted where n_rows = 0
{%- elif test == 'row_count_compared' %}
    select 1
    from (select count(*) as n_model from {{ model }}) as m,
         (select count(*) as n_compared from {{ args['compare_model'] }}) as c
    where not (n_model {{ args.get('comparison', '=') }} n_compared)
{%- elif test == 'unique_combination_of_columns' %}
    select 1 from {{ model }} group by {{ args['combination_of_columns'] | join(', ') }} having count(*) > 1
{%- else %}
    {{ exceptions.raise_compiler_error("column_checks: unknown model test '" ~ test ~ "'") }}
{%- endif %}
) as failing
having count(*) > 0
{%- endmacro %}

{#-
    One column test of the generic test `column_checks` (tests/generic/column_checks.sql): a query giving one row
    (test, column, failing_rows) when the test fails on `column` of `model`, none when it passes. The failing rows are
    counted as dbt's own test of that name would return them: NULLs pass every test but not_null.
-#}
{% macro column_check_sql(model, column, test, args) -%}
select '{{ test }}' as test, '{{ column }}' as column_name, count(*) as failing_rows
from (
{%- if test == 'not_null' %}
    select 1 from {{ model }} where {{ column }} is null
{%- elif test == 'unique' %}
    select {{ column }} from {{ model }} where {{ column }} is not null group by {{ column }} having count(*) > 1
{%- elif test == 'accepted_values' %}
    select {{ column }} from {{ model }}
    where {{ column }} not in (
        {%- for value in args['values'] -%}
            {%- if args.get('quote', true) %}'{{ value }}'{% else %}{{ value }}{% endif -%}
            {%- if not loop.last %}, {% endif -%}
        {%- endfor -%})
{%- elif test == 'relationships' %}
    select child.{{ column }} from {{ model }} as child
    left join {{ args['to'] }} as parent on child.{{ column }} = parent.{{ args['field'] }}
    where child.{{ column }} is not null and parent.{{ args['field'] }} is null
{%- elif test == 'timestamp_between' %}
    select {{ column }} from {{ model }}
    where {{ column }} < timestamp '{{ args['min_value'] }}' or {{ column }} > timestamp '{{ args['max_value'] }}'
{%- else %}
    {{ exceptions.raise_compiler_error("column_checks: unknown test '" ~ test ~ "' on column " ~ column) }}
{%- endif %}
) as failing
having count(*) > 0
{%- endmacro %}
