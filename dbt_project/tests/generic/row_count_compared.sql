{#- Fails when the model's row count is not `comparison` (=, >=, <=) the row count of `compare_model`:
    a profile derived from another keeps (=) or extends (>=) its rows. -#}
{% test row_count_compared(model, compare_model, comparison='=') %}

select n_model, n_compared
from (select count(*) as n_model from {{ model }}) as m,
     (select count(*) as n_compared from {{ compare_model }}) as c
where not (n_model {{ comparison }} n_compared)

{% endtest %}
