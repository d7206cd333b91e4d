{{ config(alias='observation_outputevents') }}
-- One Observation per outputevents row (kind-lab/mimic-fhir sql/fhir_observation_outputevents.sql), key
-- stay_id-charttime-itemid: d_items category and label, the amount with its unit.
with outputs as (

    select
        subject_id,
        stay_id,
        itemid,
        charttime,
        storetime,
        strftime(charttime, '%Y-%m-%d %H:%M:%S') as raw_charttime,
        value,
        {{ clean_text('valueuom') }} as valueuom
    from {{ source('mimic_iv', 'outputevents') }}

),

items as (

    {{ on_fhir_icu_items('outputs', 'mimic-d-items', unit=true) }}

),

patients as ({{ fhir_id_lookup('Patient', 'subject_id', 'outputs') }}),

stays as ({{ fhir_id_lookup('EncounterICU', 'stay_id', 'outputs', 'Encounter') }}),

observations as (

    select
        o.*,
        i.item_members,
        i.unit_members,
        {{ fhir_id('ObservationOutputevents', "o.stay_id || '-' || o.raw_charttime || '-' || o.itemid") }} as id,
        p.id as patient_id,
        s.id as encounter_id
    from outputs as o
    left join items as i on i.itemid = o.itemid and i.valueuom is not distinct from o.valueuom
    left join patients as p on p.subject_id = o.subject_id
    left join stays as s on s.stay_id = o.stay_id

)

select
    id, 'Observation' as resource_type, patient_id, 'outputevents' as source_table,
    to_json(struct_pack(stay_id := stay_id, charttime := raw_charttime, itemid := itemid)) as source_key,
    {{ fhir_json_object(
        on_fhir_head('Observation', 'mimic-observation-outputevents'),
        fhir_json_required('status', fhir_json_constant('final')),
        'item_members',
        fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
        fhir_json_optional('encounter', fhir_json_reference('Encounter', 'encounter_id')),
        fhir_json_optional('effectiveDateTime', on_fhir_datetime('charttime')),
        fhir_json_optional('issued', on_fhir_datetime('storetime')),
        fhir_json_optional('valueQuantity', fhir_json_quantity('value', unit_members='unit_members'))
    ) }} as resource
from {{ fhir_rows_in_id_order('observations') }}
