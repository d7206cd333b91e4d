{#- Staging cleanup for a VARCHAR column: strip surrounding whitespace, empty string -> NULL. Case is kept. -#}
{% macro clean_text(column_name) -%}
    nullif(trim({{ column_name }}), '')
{%- endmacro %}
