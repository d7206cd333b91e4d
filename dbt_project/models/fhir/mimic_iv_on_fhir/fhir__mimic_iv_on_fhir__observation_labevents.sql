{{ config(alias='observation_labevents') }}
-- built after the chartevents Observations, not beside them: the view's two largest models side by side held
-- ~1.1 GiB in the flow's process of a demo build instead of ~0.97 (the build's peak), in the same time
-- depends_on: {{ ref('fhir__mimic_iv_on_fhir__observation_chartevents') }}
-- One Observation per labevents row (kind-lab/mimic-fhir sql/fhir_observation_labevents.sql), with or without an
-- admission: the numeric value (valuenum, else the number after a comparator in the text value), otherwise the text
-- value, otherwise the comments, otherwise a data-absent reason; comparator read from the text value; the lab
-- specimen (SpecimenLab) it was measured in; status from the comments.
{% set observation_json %}
{{ fhir_json_object(
    on_fhir_head('Observation', 'mimic-observation-labevents'),
    fhir_json_required('identifier', fhir_json_array(fhir_json_identifier('observation-labevents', 'labevent_id', plain=true))),
    fhir_json_required('status', 'status'),
    fhir_json_required('category', fhir_json_array(fhir_observation_category('laboratory'))),
    'code_member',
    fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
    fhir_json_optional('encounter', fhir_json_reference('Encounter', 'encounter_id')),
    fhir_json_optional('effectiveDateTime', on_fhir_datetime('charttime')),
    fhir_json_optional('issued', on_fhir_datetime('storetime')),
    fhir_json_optional('valueQuantity', fhir_json_quantity('numeric_value', comparator_expr='comparator', unit_members='unit_members')),
    fhir_json_optional('valueString', "case when numeric_value is null then " ~ fhir_json_string('coalesce(text_value, comments)') ~ " end"),
    fhir_json_optional('dataAbsentReason', "case when numeric_value is null and text_value is null and comments is null then "
        ~ fhir_json_concept('http://terminology.hl7.org/CodeSystem/data-absent-reason', "'unknown'") ~ " end"),
    fhir_json_optional('interpretation', "case when lower(flag) = 'abnormal' then "
        ~ fhir_json_array(fhir_json_concept('http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation',
                                            "'A'", "'abnormal'")) ~ " end"),
    fhir_json_optional('note', fhir_json_array(fhir_json_object(fhir_json_optional('text', fhir_json_string('comments'))))),
    fhir_json_optional('specimen', fhir_json_reference('Specimen', 'specimen_resource_id')),
    'range_member',
    fhir_json_optional('extension', fhir_json_array(fhir_json_extension('lab-priority', 'valueString',
                                                                       fhir_json_string('priority'))))
) }}
{% endset %}
with labs as (

    select
        l.labevent_id,
        l.subject_id,
        l.hadm_id,
        l.specimen_id,
        l.itemid,
        l.charttime,
        l.storetime,
        {{ clean_text('l.value') }} as text_value,
        case
            when l.valuenum is not null then l.valuenum
            when l.value in ('<1>50', '150>') then null
            when regexp_matches(l.value, '[a-zA-Z]') then null
            when regexp_matches(l.value, '[^\x00-\x7F]') then null
            when l.value like '%<=%' then try_cast(trim(split_part(l.value, '<=', 2)) as double)
            when l.value like '%<%' then try_cast(trim(split_part(l.value, '<', 2)) as double)
            when l.value like '%>=%' then try_cast(trim(split_part(l.value, '>=', 2)) as double)
            when l.value like '%>%' then try_cast(trim(split_part(l.value, '>', 2)) as double)
        end as numeric_value,
        case
            when l.value like '%<=%' then '<='
            when l.value like '%<%' then '<'
            when l.value like '%>=%' then '>='
            when l.value like '%>%' then '>'
            when l.value ilike '%greater than%' then '>'
            when l.value ilike '%less than%' then '<'
        end as comparator,
        {{ clean_text('l.valueuom') }} as valueuom,
        l.ref_range_lower,
        l.ref_range_upper,
        {{ clean_text('l.flag') }} as flag,
        {{ clean_text('l.priority') }} as priority,
        {{ clean_text('l.comments') }} as comments,
        case
            when l.comments ilike '%error%' then '"entered-in-error"'
            when l.comments ilike '%corrected%' then '"corrected"'
            when l.comments ilike '%cancel%' then '"cancelled"'
            else '"final"'
        end as status
    from {{ source('mimic_iv', 'labevents') }} as l

),

-- the code, unit and reference range members, once per item, unit and range
items as ({{ fhir_lab_items('labs') }}),

patients as ({{ fhir_id_lookup('Patient', 'subject_id', 'labs') }}),

admissions as ({{ fhir_id_lookup('Encounter', 'hadm_id', 'labs') }}),

specimens as ({{ fhir_id_lookup('SpecimenLab', 'specimen_id', 'labs', resource_type='Specimen') }}),

observations as (

    select
        labs.*,
        items.code_member,
        items.unit_members,
        items.range_member,
        {{ fhir_id('ObservationLabevents', 'labs.labevent_id') }} as id,
        patients.id as patient_id,
        admissions.id as encounter_id,
        specimens.id as specimen_resource_id
    from labs
    left join items
        on items.itemid = labs.itemid and items.valueuom is not distinct from labs.valueuom
       and items.ref_range_lower is not distinct from labs.ref_range_lower
       and items.ref_range_upper is not distinct from labs.ref_range_upper
    left join patients on patients.subject_id = labs.subject_id
    left join admissions on admissions.hadm_id = labs.hadm_id
    left join specimens on specimens.specimen_id = labs.specimen_id

)

select
    id, 'Observation' as resource_type, patient_id, 'labevents' as source_table,
    to_json(struct_pack(labevent_id := labevent_id)) as source_key,
    {{ observation_json }} as resource
from {{ fhir_rows_in_id_order('observations') }}
