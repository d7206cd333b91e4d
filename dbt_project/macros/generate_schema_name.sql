{#- Use a model's +schema as the schema name itself (staging_mimic_iv), not <target>_<schema>. -#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {{ custom_schema_name if custom_schema_name is not none else target.schema }}
{%- endmacro %}
