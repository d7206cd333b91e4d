{{ config(alias='observation_micro_org') }}
-- FHIR Observations of the organisms grown in the microbiology tests of the MIMIC-IV profiles: one per
-- test_itemid-micro_specimen_id-org_itemid among the EHRSQL-2024 microbiologyevents rows (shifted charttime), shaped
-- like MIMIC-IV on FHIR's ObservationMicroOrg: code = organism (original MIMIC-IV name), derivedFrom -> its test,
-- hasMember -> its susceptibility observations; without susceptibilities the comment (else 'No susceptibility data
-- present') is the valueString.
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
    fhir_json_optional('effectiveDateTime', fhir_json_datetime('charttime')),
    fhir_json_optional('hasMember', 'has_member'),
    fhir_json_optional('valueString', "case when has_member is null then "
        ~ fhir_json_string("coalesce(comments, 'No susceptibility data present')") ~ " end"),
    fhir_json_required('derivedFrom', fhir_json_array(fhir_json_reference('Observation', 'test_id')))
) }}
{% endset %}
with micro as (

    {{ fhir_micro_rows() }}

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
from observations
