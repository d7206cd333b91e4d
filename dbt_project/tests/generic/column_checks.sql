{#-
    A model's tests in one node. `model_tests` lists the table tests it would list under its own `data_tests`
    (not_empty, row_count_compared, unique_combination_of_columns; tests/generic/), `columns` maps each column to the
    tests it would list under its own `data_tests` (not_null, unique, accepted_values, relationships,
    timestamp_between), e.g.
        model_tests: [not_empty, {row_count_compared: {arguments: {compare_model: "ref('patients')"}}}]
        columns: {subject_id: [not_null, {relationships: {arguments: {to: "ref('patients')", field: subject_id}}}]}
    Each test has the contract of the test of that name; the node fails with one row per failing test
    (test, column or NULL, failing_rows). One node per model instead of one per test: dbt's fixed cost per node
    (~40 ms to parse and run) was most of a demo build's test time. A test with a severity of its own (an optional
    source's not_empty that only warns) stays a node of its own.
-#}
{% test column_checks(model, columns={}, model_tests=[]) %}

{%- set checks = [] -%}
{%- for test in model_tests -%}
    {%- if test is string -%}
        {%- do checks.append(model_check_sql(model, test, {})) -%}
    {%- else -%}
        {%- for name, body in test.items() -%}
            {%- do checks.append(model_check_sql(model, name, (body or {}).get('arguments', body or {}))) -%}
        {%- endfor -%}
    {%- endif -%}
{%- endfor -%}
{%- for column, tests in columns.items() -%}
    {%- for test in tests -%}
        {%- if test is string -%}
            {%- do checks.append(column_check_sql(model, column, test, {})) -%}
        {%- else -%}
            {%- for name, body in test.items() -%}
                {%- do checks.append(column_check_sql(model, column, name, (body or {}).get('arguments', body or {}))) -%}
            {%- endfor -%}
        {%- endif -%}
    {%- endfor -%}
{%- endfor %}

{{ checks | join('\nunion all\n') }}

{% endtest %}
