{#-
    Fails on every row whose column lies outside [min_value, max_value] (timestamps given as
    'YYYY-MM-DD HH:MM:SS' strings). NULLs pass: pair with not_null where the column is required.
-#}
{% test timestamp_between(model, column_name, min_value, max_value) %}

select {{ column_name }}
from {{ model }}
where {{ column_name }} < timestamp '{{ min_value }}'
   or {{ column_name }} > timestamp '{{ max_value }}'

{% endtest %}
