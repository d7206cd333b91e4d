{{ config(alias='observation_micro_susc') }}
-- FHIR Observations of the antibiotic susceptibilities of the MIMIC-IV profiles: one per EHRSQL-2024
-- microbiologyevents row with an antibiotic (id from microevent_id; shifted charttime), shaped like MIMIC-IV on FHIR's
-- ObservationMicroSusc: code = antibiotic (original MIMIC-IV name), value = the interpretation (S/R/I/P mapped to
-- v3-ObservationInterpretation as MIMIC-IV on FHIR maps them), derivedFrom -> its organism observation, the dilution
-- (with its comparator) in the dilution-details extension, comments as note.
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
    fhir_json_optional('effectiveDateTime', fhir_json_datetime('charttime')),
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

    {{ fhir_micro_rows() }}

),

susceptibilities as (

    select
        microevent_id,
        ab_itemid,
        ab_name,
        charttime,
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
from susceptibilities
