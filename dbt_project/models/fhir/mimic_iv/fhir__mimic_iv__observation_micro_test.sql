{{ config(alias='observation_micro_test') }}
-- FHIR Observations of the microbiology tests of the MIMIC-IV profiles: one per micro_specimen_id-test_itemid among
-- the EHRSQL-2024 microbiologyevents rows (shifted charttime), shaped like MIMIC-IV on FHIR's ObservationMicroTest:
-- the test's specimen and admission, hasMember -> its organism observations; a test without organism carries the
-- result comment as valueString, or a NullFlavor (de-identified '___' comment: MSK, none: NI). Original MIMIC-IV
-- test name.
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
    fhir_json_optional('effectiveDateTime', fhir_json_datetime('charttime')),
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

    {{ fhir_micro_rows() }}

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
from observations
