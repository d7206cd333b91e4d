{#-
    Fails on every combination of the given columns that occurs more than once
    (same contract as dbt_utils.unique_combination_of_columns, which cannot be installed here).
    Rows where a key column is NULL are grouped together, so NULL keys count as duplicates.
-#}
{% test unique_combination_of_columns(model, combination_of_columns) %}

{%- set columns_csv = combination_of_columns | join(', ') %}

select
    {{ columns_csv }},
    count(*) as n_rows
from {{ model }}
group by {{ columns_csv }}
having count(*) > 1

{% endtest %}
