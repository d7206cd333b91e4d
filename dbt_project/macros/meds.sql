{#- A code with a dot inserted after `position` characters when it is longer (MIMIC_IV_MEDS pre_MEDS.py add_dot). -#}
{% macro meds_dotted(code, position) -%}
    case when length({{ code }}) > ({{ position }})
         then substr({{ code }}, 1, {{ position }}) || '.' || substr({{ code }}, ({{ position }}) + 1)
         else {{ code }} end
{%- endmacro %}
