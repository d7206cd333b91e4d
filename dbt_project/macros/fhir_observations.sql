{#- Domain macros of the FHIR Observation and Specimen models (labevents, chartevents, outputevents,
    microbiologyevents), shaped like MIMIC-IV on FHIR's resources (kind-lab/mimic-fhir, sql/fhir_observation_*.sql,
    sql/fhir_specimen.sql): categories, reference ranges, microbiology ids and rows. JSON: macros/fhir_json.sql.
    These models hold most of the FHIR view's resources: the parts that depend only on the item, unit or range
    (code, category, unit, reference range) are written once each and joined in.
    tests/integration/test_fhir_observations.py parses and validates every resource. -#}

{#- Observation.category of the HL7 observation-category code system ('laboratory', 'vital-signs'), a constant. -#}
{% macro fhir_observation_category(code) -%}
    {%- set displays = {'laboratory': 'Laboratory', 'vital-signs': 'Vital Signs'} -%}
    '{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"{{ code }}","display":"{{ displays[code] }}"}]}'
{%- endmacro %}

{#- Observation.referenceRange from a lower and an upper bound (either may be missing), in the unit of
    unit_members (fhir_json_unit_members); NULL without either. -#}
{% macro fhir_observation_reference_range(low_expr, high_expr, unit_members) -%}
    {{ fhir_json_array(fhir_json_object(
        fhir_json_optional('low', fhir_json_quantity(low_expr, unit_members=unit_members)),
        fhir_json_optional('high', fhir_json_quantity(high_expr, unit_members=unit_members)))) }}
{%- endmacro %}

{#- Per item, unit and reference range of the `labs` CTE (itemid, valueuom, ref_range_lower, ref_range_upper): its
    code member (d_labitems label), unit members and referenceRange member, written once each. A select statement. -#}
{% macro fhir_lab_items(labs) %}
    select
        k.*,
        {{ fhir_json_optional('code', fhir_json_concept('mimic-d-labitems', 'k.itemid', 'd.label')) }} as code_member,
        {{ fhir_json_unit_members('k.valueuom') }} as unit_members,
        {{ fhir_json_optional('referenceRange', fhir_observation_reference_range(
            'k.ref_range_lower', 'k.ref_range_upper', fhir_json_unit_members('k.valueuom'))) }} as range_member
    from (select distinct itemid, valueuom, ref_range_lower, ref_range_upper from {{ labs }}) as k
    left join {{ ref('stg_mimic_iv__d_labitems') }} as d on d.itemid = k.itemid
{% endmacro %}

{#- The microbiology ids from the raw MIMIC-IV keys (docs/benchmarks.md#fhir-resource-ids, as MIMIC-IV on FHIR makes them): test
    micro_specimen_id-test_itemid, organism test_itemid-micro_specimen_id-org_itemid (test first). -#}
{% macro fhir_micro_test_id(specimen_expr, test_expr) -%}
    {{ fhir_id('ObservationMicroTest', specimen_expr ~ " || '-' || " ~ test_expr) }}
{%- endmacro %}

{% macro fhir_micro_org_id(test_expr, specimen_expr, org_expr) -%}
    {{ fhir_id('ObservationMicroOrg', test_expr ~ " || '-' || " ~ specimen_expr ~ " || '-' || " ~ org_expr) }}
{%- endmacro %}

{#- The microbiology rows of rows_model (the EHRSQL-2024 intermediate model: the cohort's rows, shifted charttime; or
    the mimic_iv_on_fhir view's: every row, raw time) with MIMIC-IV's raw fields in their original case (joined by
    microevent_id). A select statement, for a CTE. -#}
{% macro fhir_micro_rows(rows_model) %}
    select
        s.microevent_id,
        s.micro_specimen_id,
        s.spec_itemid,
        s.spec_type_desc,
        s.test_itemid,
        s.test_name,
        s.org_itemid,
        s.org_name,
        s.ab_itemid,
        s.ab_name,
        s.dilution_comparison,
        s.dilution_value,
        s.interpretation,
        s.comments,
        s.storetime,
        m.subject_id,
        m.hadm_id,
        m.charttime
    from {{ ref(rows_model) }} as m
    inner join {{ ref('stg_mimic_iv__microbiologyevents') }} as s
        on s.microevent_id = cast(m.source_key->>'microevent_id' as bigint)
{% endmacro %}
