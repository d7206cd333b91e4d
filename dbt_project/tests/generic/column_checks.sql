{#-
    A model's column tests in one node: `columns` maps each column to the tests it would list under its own
    `data_tests` (not_null, unique, accepted_values, relationships, timestamp_between), e.g.
        columns: {subject_id: [not_null, {relationships: {arguments: {to: "ref('patients')", field: subject_id}}}]}
    Each test has the contract of the dbt test of that name; the node fails with one row per failing test
    (test, column, failing_rows). One node per model instead of one per column: dbt's fixed cost per node (~40 ms)
    was most of a demo build's test time.
-#}
{% test column_checks(model, columns) %}

{%- set checks = [] -%}
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
