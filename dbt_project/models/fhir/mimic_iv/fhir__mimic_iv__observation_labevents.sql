{{ config(alias='observation_labevents') }}
-- FHIR Observations of the lab results of the MIMIC-IV profiles (one per row of the EHRSQL-2024 labevents, same
-- shifted charttime), shaped like MIMIC-IV on FHIR's ObservationLabevents with MIMIC-IV's original values: d_labitems
-- label, unit, reference range, flag (abnormal -> interpretation A), priority and comments. Id from labevent_id.
-- No specimen reference: lab specimens (MIMIC-IV on FHIR's SpecimenLab) are not part of the FHIR view.
{% set observation_json %}
{{ fhir_json_object(
    fhir_json_required('resourceType', fhir_json_constant('Observation')),
    fhir_json_required('id', fhir_json_plain_string('id')),
    fhir_json_required('meta', fhir_json_meta('mimic-observation-labevents')),
    fhir_json_required('identifier', fhir_json_array(fhir_json_identifier('observation-labevents', 'labevent_id', plain=true))),
    fhir_json_required('status', 'status'),
    fhir_json_required('category', fhir_json_array(fhir_observation_category('laboratory'))),
    'code_member',
    fhir_json_required('subject', 'patient_reference'),
    fhir_json_optional('encounter', 'encounter_reference'),
    fhir_json_optional('effectiveDateTime', fhir_json_datetime('charttime')),
    fhir_json_optional('valueQuantity', fhir_json_quantity('valuenum', comparator_expr='comparator', unit_members='unit_members')),
    fhir_json_optional('interpretation', "case when lower(flag) = 'abnormal' then "
        ~ fhir_json_array(fhir_json_concept('http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation',
                                            "'A'", "'Abnormal'")) ~ " end"),
    fhir_json_optional('note', fhir_json_array(fhir_json_object(fhir_json_optional('text', fhir_json_string('comments'))))),
    'range_member',
    fhir_json_optional('extension', fhir_json_array(fhir_json_extension('mimic-lab-priority', 'valueString',
                                                                       fhir_json_string('priority'))))
) }}
{% endset %}
with events as (

    select
        l.source_key,
        cast(l.source_key->>'labevent_id' as bigint) as labevent_id,
        l.subject_id,
        l.hadm_id,
        l.itemid,
        l.charttime,
        l.valuenum
    from {{ ref('int_ehrsql2024__mimic_iv__labevents') }} as l

),

-- MIMIC-IV's original values of those rows, from the raw rows cleaned as staging cleans them (clean_text) once
-- joined: cleaning every row of stg_mimic_iv__labevents first costs more than the rest of this model
labs as (

    select
        events.*,
        {{ clean_text('s.valueuom') }} as valueuom,
        case
            when s.value like '%<=%' then '<='
            when s.value like '%<%' then '<'
            when s.value like '%>=%' then '>='
            when s.value like '%>%' then '>'
            when s.value ilike '%greater than%' then '>'
            when s.value ilike '%less than%' then '<'
        end as comparator,
        s.ref_range_lower,
        s.ref_range_upper,
        {{ clean_text('s.flag') }} as flag,
        {{ clean_text('s.priority') }} as priority,
        {{ clean_text('s.comments') }} as comments,
        -- as MIMIC-IV on FHIR reads the status from the comments (a JSON string)
        case
            when s.comments ilike '%error%' then '"entered-in-error"'
            when s.comments ilike '%corrected%' then '"corrected"'
            when s.comments ilike '%cancel%' then '"cancelled"'
            else '"final"'
        end as status
    from events
    inner join {{ source('mimic_iv', 'labevents') }} as s on s.labevent_id = events.labevent_id

),

-- the code, unit and reference range members, once per item, unit and range
items as ({{ fhir_lab_items('labs') }}),

patients as ({{ fhir_id_lookup('Patient', 'subject_id', 'events') }}),

admissions as ({{ fhir_id_lookup('Encounter', 'hadm_id', 'events') }}),

observations as (

    select
        labs.*,
        items.code_member,
        items.unit_members,
        items.range_member,
        {{ fhir_id('ObservationLabevents', 'labs.labevent_id') }} as id,
        patients.id as patient_id,
        patients.reference as patient_reference,
        admissions.reference as encounter_reference
    from labs
    left join items
        on items.itemid = labs.itemid and items.valueuom is not distinct from labs.valueuom
       and items.ref_range_lower is not distinct from labs.ref_range_lower
       and items.ref_range_upper is not distinct from labs.ref_range_upper
    left join patients on patients.subject_id = labs.subject_id
    left join admissions on admissions.hadm_id = labs.hadm_id

)

select
    id, 'Observation' as resource_type, patient_id, 'labevents' as source_table, source_key,
    {{ observation_json }} as resource
from {{ fhir_rows_in_id_order('observations') }}
