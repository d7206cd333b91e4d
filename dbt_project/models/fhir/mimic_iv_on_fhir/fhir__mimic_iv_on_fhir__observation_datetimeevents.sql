{{ config(alias='observation_datetimeevents') }}
-- One Observation per datetimeevents row (kind-lab/mimic-fhir sql/fhir_observation_datetimeevents.sql), key
-- stay_id-charttime-itemid: d_items category and label, the charted date and time as its value.
with events as (

    select
        subject_id,
        stay_id,
        itemid,
        charttime,
        storetime,
        strftime(charttime, '%Y-%m-%d %H:%M:%S') as raw_charttime,
        value
    from {{ source('mimic_iv', 'datetimeevents') }}

),

items as (

    {{ on_fhir_icu_items('events', 'mimic-d-items') }}

),

patients as ({{ fhir_id_lookup('Patient', 'subject_id', 'events') }}),

stays as ({{ fhir_id_lookup('EncounterICU', 'stay_id', 'events', 'Encounter') }}),

observations as (

    select
        e.*,
        i.item_members,
        {{ fhir_id('ObservationDatetimeevents', "e.stay_id || '-' || e.raw_charttime || '-' || e.itemid") }} as id,
        p.id as patient_id,
        s.id as encounter_id
    from events as e
    left join items as i on i.itemid = e.itemid
    left join patients as p on p.subject_id = e.subject_id
    left join stays as s on s.stay_id = e.stay_id

)

select
    id, 'Observation' as resource_type, patient_id, 'datetimeevents' as source_table,
    to_json(struct_pack(stay_id := stay_id, charttime := raw_charttime, itemid := itemid)) as source_key,
    {{ fhir_json_object(
        on_fhir_head('Observation', 'mimic-observation-datetimeevents'),
        fhir_json_required('status', fhir_json_constant('final')),
        'item_members',
        fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
        fhir_json_optional('encounter', fhir_json_reference('Encounter', 'encounter_id')),
        fhir_json_optional('effectiveDateTime', on_fhir_datetime('charttime')),
        fhir_json_optional('issued', on_fhir_datetime('storetime')),
        fhir_json_optional('valueDateTime', on_fhir_datetime('value'))
    ) }} as resource
from {{ fhir_rows_in_id_order('observations') }}
