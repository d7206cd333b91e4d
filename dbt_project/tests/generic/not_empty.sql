{#- Fails (one row) when the model has no rows at all. -#}
{% test not_empty(model) %}

select n_rows
from (select count(*) as n_rows from {{ model }}) as counted
where n_rows = 0

{% endtest %}
