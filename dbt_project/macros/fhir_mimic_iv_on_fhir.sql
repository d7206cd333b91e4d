{#- The conventions of the mimic_iv_on_fhir view (models/fhir/mimic_iv_on_fhir/): MIMIC-IV on FHIR's as its published
    conversion writes them (kind-lab/mimic-fhir, sql/fhir_*.sql and sql/fhir_etl/map_*.sql; docs/benchmarks.md#mimic-iv-on-fhir-view).
    JSON writing: macros/fhir_json.sql. -#}

{#- The session time zone of the published conversion: every raw time is written with its New York offset. -#}
{% macro on_fhir_zone() -%}America/New_York{%- endmacro %}

{#- A raw time as a JSON dateTime the way MIMIC-IV on FHIR writes it (fhir_datetime with the zone). -#}
{% macro on_fhir_datetime(timestamp_expr) -%}
    {{ fhir_json_datetime(timestamp_expr, zone=on_fhir_zone()) }}
{%- endmacro %}

{#- A Period of raw times. -#}
{% macro on_fhir_period(start_expr, end_expr) -%}
    {{ fhir_json_period(start_expr, end_expr, zone=on_fhir_zone()) }}
{%- endmacro %}

{#- The Reference to MIMIC-IV on FHIR's one Organization (the hospital; ehrbench.fhir.ids.ORGANIZATION_KEY). -#}
{% macro on_fhir_organization_reference() -%}
    {{ fhir_json_reference('Organization', fhir_id('Organization', "'http://hl7.org/fhir/sid/us-npi/1194052720'")) }}
{%- endmacro %}

{#- The first members of every resource: resourceType, id (column `id`), meta.profile. -#}
{% macro on_fhir_head(resource_type, profile) -%}
    {{ fhir_json_required('resourceType', fhir_json_constant(resource_type)) }},
    {{ fhir_json_required('id', fhir_json_plain_string('id')) }},
    {{ fhir_json_required('meta', fhir_json_meta(profile)) }}
{%- endmacro %}

{#- Free text collapsed as the conversion writes codes: trimmed, inner whitespace runs made one space; NULL when
    empty. -#}
{% macro on_fhir_code(text_expr) -%}
    {{ fhir_med_code(text_expr) }}
{%- endmacro %}

{#- Observation.category of an ICU item: its d_items category in MIMIC-IV's observation-category code system. -#}
{% macro on_fhir_item_category(category_expr) -%}
    {{ fhir_json_array(fhir_json_concept('mimic-observation-category', category_expr)) }}
{%- endmacro %}
