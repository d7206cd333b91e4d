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

{#- The items CTE of an ICU events model (chartevents, outputevents, datetimeevents): per item (and unit) of the
    `events` CTE, its category and code members (d_items category and label; code system code_system), with unit=true
    its unit members, with normal_range=true its d_items normal range member. A select statement. -#}
{% macro on_fhir_icu_items(events, code_system, unit=false, normal_range=false) %}
    select
        k.itemid,
        {% if unit -%} k.valueuom, {%- endif %}
        concat(
            {{ fhir_json_optional('category', on_fhir_item_category('d.category')) }},
            {{ fhir_json_optional('code', fhir_json_concept(code_system, 'k.itemid', 'd.label')) }}
        ) as item_members
        {%- if unit %},
        {{ fhir_json_unit_members('k.valueuom') }} as unit_members
        {%- endif %}
        {%- if normal_range %},
        {{ fhir_json_optional('referenceRange', fhir_observation_reference_range(
            'd.lownormalvalue', 'd.highnormalvalue', fhir_json_unit_members('k.valueuom'))) }} as range_member
        {%- endif %}
    from (select distinct itemid {%- if unit %}, valueuom{% endif %} from {{ events }}) as k
    left join {{ ref('stg_mimic_iv__d_items') }} as d on d.itemid = k.itemid
{% endmacro %}

{#- The schedule columns of a pharmacy order (alias `ph`) as the conversion reads them: frequency and duration only
    when both are given, the duration's unit, an all-digit hourly maximum. -#}
{% macro on_fhir_pharmacy_schedule(ph) -%}
        case when {{ ph }}.frequency is not null and {{ ph }}.duration is not null
             then {{ on_fhir_code(ph ~ '.frequency') }} end as frequency,
        case when {{ ph }}.frequency is not null and {{ ph }}.duration is not null then {{ ph }}.duration end as duration,
        case {{ ph }}.duration_interval when 'Hours' then 'h' when 'Days' then 'd' when 'Weeks' then 'wk'
                                        when 'Months' then 'mo' end as duration_unit,
        case when regexp_full_match({{ ph }}.one_hr_max, '[0-9.]+') then try_cast({{ ph }}.one_hr_max as double) end
            as one_hr_max
{%- endmacro %}

{#- Dosage.timing of those schedule columns (frequency code, duration); NULL without them. -#}
{% macro on_fhir_dosage_timing() -%}
    {{ fhir_json_optional('timing', fhir_json_object(
        fhir_json_optional('code', fhir_json_concept('mimic-medication-frequency', 'frequency')),
        fhir_json_optional('repeat', fhir_json_object(
            fhir_json_optional('duration', fhir_json_number('duration')),
            fhir_json_optional('durationUnit', fhir_json_string('duration_unit')))))) }}
{%- endmacro %}

{#- Dosage.maxDosePerPeriod of the hourly maximum; NULL without one. -#}
{% macro on_fhir_dosage_max_per_hour() -%}
    {{ fhir_json_optional('maxDosePerPeriod', "case when one_hr_max is not null then concat('{\"numerator\":{\"value\":', "
        ~ fhir_json_number('one_hr_max') ~ ", '},\"denominator\":{\"value\":1,\"unit\":\"h\",\"system\":\"http://unitsofmeasure.org\"}}') end") }}
{%- endmacro %}
