{#- The microbiology resources (SpecimenMicro, ObservationMicroTest/Org/Susc) as MIMIC-IV on FHIR shapes them
    (kind-lab/mimic-fhir sql/fhir_specimen.sql, sql/fhir_observation_micro_*.sql), of the microbiology rows of
    rows_model (fhir_micro_rows): the EHRSQL-2024 rows (fhir__mimic_iv) or every raw row (fhir__mimic_iv_on_fhir,
    zone given: raw times written as the conversion writes them, and a susceptibility observed at its storetime).
    One macro per model; the models say which rows and view. -#}

{% macro fhir_micro_specimen_resources(rows_model, zone=none) %}
{% set specimen_json %}
{{ fhir_json_object(
    fhir_json_required('resourceType', fhir_json_constant('Specimen')),
    fhir_json_required('id', fhir_json_plain_string('id')),
    fhir_json_required('meta', fhir_json_meta('mimic-specimen')),
    fhir_json_required('identifier', fhir_json_array(fhir_json_identifier('specimen-micro', 'micro_specimen_id', plain=true))),
    fhir_json_optional('type', fhir_json_concept('mimic-spec-type-desc', 'spec_itemid', 'spec_type_desc',
                                                 text_expr='spec_type_desc')),
    fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
    fhir_json_optional('collection', fhir_json_object(fhir_json_optional('collectedDateTime', fhir_json_datetime('charttime', zone))))
) }}
{% endset %}
with micro as (

    {{ fhir_micro_rows(rows_model) }}

),

specimens as (

    select
        micro_specimen_id,
        max(spec_itemid) as spec_itemid,
        max(spec_type_desc) as spec_type_desc,
        max(charttime) as charttime,
        {{ fhir_id('SpecimenMicro', 'micro_specimen_id') }} as id,
        {{ fhir_id('Patient', 'max(subject_id)') }} as patient_id
    from micro
    group by micro_specimen_id

)

select
    id, 'Specimen' as resource_type, patient_id, 'microbiologyevents' as source_table,
    to_json(struct_pack(micro_specimen_id := micro_specimen_id)) as source_key,
    {{ specimen_json }} as resource
from {{ fhir_rows_in_id_order('specimens') }}
{% endmacro %}

{% macro fhir_micro_test_resources(rows_model, zone=none) %}
{% set observation_json %}
{{ fhir_json_object(
    fhir_json_required('resourceType', fhir_json_constant('Observation')),
    fhir_json_required('id', fhir_json_plain_string('id')),
    fhir_json_required('meta', fhir_json_meta('mimic-observation-micro-test')),
    fhir_json_required('status', fhir_json_constant('final')),
    fhir_json_required('category', fhir_json_array(fhir_observation_category('laboratory'))),
    fhir_json_optional('code', fhir_json_concept('mimic-microbiology-test', 'test_itemid', 'test_name')),
    fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
    fhir_json_optional('encounter', fhir_json_reference('Encounter', 'encounter_id')),
    fhir_json_optional('effectiveDateTime', fhir_json_datetime('charttime', zone)),
    fhir_json_required('specimen', fhir_json_reference('Specimen', 'specimen_id')),
    fhir_json_optional('hasMember', 'has_member'),
    fhir_json_optional('valueString', "case when has_member is null and comments <> '___' then "
        ~ fhir_json_string('comments') ~ " end"),
    fhir_json_optional('valueCodeableConcept', "case when has_member is null and comments = '___' then "
        ~ fhir_json_concept('http://terminology.hl7.org/CodeSystem/v3-NullFlavor', "'MSK'", "'masked'")
        ~ " when has_member is null and comments is null then "
        ~ fhir_json_concept('http://terminology.hl7.org/CodeSystem/v3-NullFlavor', "'NI'", "'NoInformation'") ~ " end")
) }}
{% endset %}
with micro as (

    {{ fhir_micro_rows(rows_model) }}

),

organisms as (

    select micro_specimen_id, test_itemid, org_itemid
    from micro
    where org_itemid is not null
    group by micro_specimen_id, test_itemid, org_itemid

),

-- hasMember: the test's organism observations
members as (

    select
        micro_specimen_id,
        test_itemid,
        {{ fhir_json_array_agg(fhir_json_reference('Observation',
                                                   fhir_micro_org_id('test_itemid', 'micro_specimen_id', 'org_itemid')),
                               'org_itemid') }} as has_member
    from organisms
    group by micro_specimen_id, test_itemid

),

tests as (

    select
        micro_specimen_id,
        test_itemid,
        max(test_name) as test_name,
        max(subject_id) as subject_id,
        max(hadm_id) as hadm_id,
        max(charttime) as charttime,
        max(comments) filter (where org_itemid is null) as comments
    from micro
    group by micro_specimen_id, test_itemid

),

observations as (

    select
        tests.micro_specimen_id,
        tests.test_itemid,
        tests.test_name,
        tests.charttime,
        tests.comments,
        members.has_member,
        {{ fhir_micro_test_id('tests.micro_specimen_id', 'tests.test_itemid') }} as id,
        {{ fhir_id('Patient', 'tests.subject_id') }} as patient_id,
        {{ fhir_id('Encounter', 'tests.hadm_id') }} as encounter_id,
        {{ fhir_id('SpecimenMicro', 'tests.micro_specimen_id') }} as specimen_id
    from tests
    left join members
        on members.micro_specimen_id = tests.micro_specimen_id and members.test_itemid = tests.test_itemid

)

select
    id, 'Observation' as resource_type, patient_id, 'microbiologyevents' as source_table,
    to_json(struct_pack(micro_specimen_id := micro_specimen_id, test_itemid := test_itemid)) as source_key,
    {{ observation_json }} as resource
from {{ fhir_rows_in_id_order('observations') }}
{% endmacro %}

{% macro fhir_micro_org_resources(rows_model, zone=none) %}
{% set observation_json %}
{{ fhir_json_object(
    fhir_json_required('resourceType', fhir_json_constant('Observation')),
    fhir_json_required('id', fhir_json_plain_string('id')),
    fhir_json_required('meta', fhir_json_meta('mimic-observation-micro-org')),
    fhir_json_required('identifier', fhir_json_array(fhir_json_identifier('observation-micro-org',
        "test_itemid || '-' || micro_specimen_id || '-' || org_itemid", plain=true))),
    fhir_json_required('status', fhir_json_constant('final')),
    fhir_json_required('category', fhir_json_array(fhir_observation_category('laboratory'))),
    fhir_json_optional('code', fhir_json_concept('mimic-microbiology-organism', 'org_itemid', 'org_name')),
    fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
    fhir_json_optional('effectiveDateTime', fhir_json_datetime('charttime', zone)),
    fhir_json_optional('hasMember', 'has_member'),
    fhir_json_optional('valueString', "case when has_member is null then "
        ~ fhir_json_string("coalesce(comments, 'No susceptibility data present')") ~ " end"),
    fhir_json_required('derivedFrom', fhir_json_array(fhir_json_reference('Observation', 'test_id')))
) }}
{% endset %}
with micro as (

    {{ fhir_micro_rows(rows_model) }}

),

organisms as (

    select
        test_itemid,
        micro_specimen_id,
        org_itemid,
        max(org_name) as org_name,
        max(subject_id) as subject_id,
        max(charttime) as charttime,
        max(comments) as comments,
        -- hasMember: the organism's susceptibility observations
        {{ fhir_json_array_agg("case when ab_itemid is not null then "
                               ~ fhir_json_reference('Observation', fhir_id('ObservationMicroSusc', 'microevent_id')) ~ " end",
                               'microevent_id') }} as has_member
    from micro
    where org_itemid is not null
    group by test_itemid, micro_specimen_id, org_itemid

),

observations as (

    select
        *,
        {{ fhir_micro_org_id('test_itemid', 'micro_specimen_id', 'org_itemid') }} as id,
        {{ fhir_id('Patient', 'subject_id') }} as patient_id,
        {{ fhir_micro_test_id('micro_specimen_id', 'test_itemid') }} as test_id
    from organisms

)

select
    id, 'Observation' as resource_type, patient_id, 'microbiologyevents' as source_table,
    to_json(struct_pack(test_itemid := test_itemid, micro_specimen_id := micro_specimen_id,
                        org_itemid := org_itemid)) as source_key,
    {{ observation_json }} as resource
from {{ fhir_rows_in_id_order('observations') }}
{% endmacro %}

{% macro fhir_micro_susc_resources(rows_model, zone=none) %}
{%- set time_column = 'charttime' if zone is none else 'storetime' -%}
{% set observation_json %}
{{ fhir_json_object(
    fhir_json_required('resourceType', fhir_json_constant('Observation')),
    fhir_json_required('id', fhir_json_plain_string('id')),
    fhir_json_required('meta', fhir_json_meta('mimic-observation-micro-susc')),
    fhir_json_required('identifier', fhir_json_array(fhir_json_identifier('observation-micro-susc', 'microevent_id', plain=true))),
    fhir_json_required('status', fhir_json_constant('final')),
    fhir_json_required('category', fhir_json_array(fhir_observation_category('laboratory'))),
    fhir_json_optional('code', fhir_json_concept('mimic-microbiology-antibiotic', 'ab_itemid', 'ab_name')),
    fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
    fhir_json_optional('effectiveDateTime', fhir_json_datetime(time_column, zone)),
    fhir_json_optional('valueCodeableConcept', fhir_json_concept(
        'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation', 'interpretation_code',
        'interpretation_display')),
    fhir_json_optional('derivedFrom', fhir_json_array(fhir_json_reference('Observation', 'org_id'))),
    fhir_json_optional('note', fhir_json_array(fhir_json_object(fhir_json_optional('text', fhir_json_string('comments'))))),
    fhir_json_optional('extension', fhir_json_array(fhir_json_extension('dilution-details', 'valueQuantity',
        fhir_json_quantity('dilution_value', comparator_expr='comparator'))))
) }}
{% endset %}
with micro as (

    {{ fhir_micro_rows(rows_model) }}

),

susceptibilities as (

    select
        microevent_id,
        ab_itemid,
        ab_name,
        charttime,
        storetime,
        comments,
        dilution_value,
        -- '=' is FHIR's default (no comparator); MIMIC-IV writes '>=' as '=>'
        case dilution_comparison when '=>' then '>=' when '>=' then '>=' when '<=' then '<='
                                 when '<' then '<' when '>' then '>' end as comparator,
        case interpretation when 'S' then 'S' when 'R' then 'R' when 'I' then 'IND' when 'P' then 'IE' end
            as interpretation_code,
        case interpretation when 'S' then 'Susceptible' when 'R' then 'Resistant' when 'I' then 'Indeterminate'
                            when 'P' then 'Insufficient evidence' end as interpretation_display,
        {{ fhir_id('ObservationMicroSusc', 'microevent_id') }} as id,
        {{ fhir_id('Patient', 'subject_id') }} as patient_id,
        case when org_itemid is not null
            then {{ fhir_micro_org_id('test_itemid', 'micro_specimen_id', 'org_itemid') }} end as org_id
    from micro
    where ab_itemid is not null

)

select
    id, 'Observation' as resource_type, patient_id, 'microbiologyevents' as source_table,
    to_json(struct_pack(microevent_id := microevent_id)) as source_key,
    {{ observation_json }} as resource
from {{ fhir_rows_in_id_order('susceptibilities') }}
{% endmacro %}
