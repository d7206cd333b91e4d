{{ config(alias='observation_chartevents') }}
-- One Observation per chartevents key stay_id-charttime-itemid-value with a value (kind-lab/mimic-fhir
-- sql/fhir_observation_chartevents.sql, which also leaves out one charting of stay 34934165 by its literal time):
-- d_items category, label and normal range; the number with its unit, else the text value. A key charted twice (the
-- same value at one time) is one resource: the first row's.
{% set observation_json %}
{{ fhir_json_object(
    on_fhir_head('Observation', 'mimic-observation-chartevents'),
    fhir_json_required('status', fhir_json_constant('final')),
    'item_members',
    fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
    fhir_json_optional('encounter', fhir_json_reference('Encounter', 'encounter_id')),
    fhir_json_optional('effectiveDateTime', on_fhir_datetime('charttime')),
    fhir_json_optional('issued', on_fhir_datetime('storetime')),
    fhir_json_optional('valueQuantity', fhir_json_quantity('valuenum', unit_members='unit_members')),
    fhir_json_optional('valueString', "case when valuenum is null then " ~ fhir_json_string('text_value') ~ " end"),
    'range_member'
) }}
{% endset %}
with charts as (

    select
        subject_id,
        stay_id,
        itemid,
        charttime,
        storetime,
        strftime(charttime, '%Y-%m-%d %H:%M:%S') as raw_charttime,
        value as raw_value,
        {{ clean_text('value') }} as text_value,
        valuenum,
        {{ clean_text('valueuom') }} as valueuom
    from {{ source('mimic_iv', 'chartevents') }}
    where value is not null
      and not (stay_id = 34934165 and charttime = timestamp '2151-10-03 05:14:00')
    qualify row_number() over (partition by stay_id, charttime, itemid, value) = 1

),

-- category, code, unit and normal range members, written once per item and unit
items as (

    {{ on_fhir_icu_items('charts', 'mimic-chartevents-d-items', unit=true, normal_range=true) }}

),

patients as ({{ fhir_id_lookup('Patient', 'subject_id', 'charts') }}),

stays as ({{ fhir_id_lookup('EncounterICU', 'stay_id', 'charts', 'Encounter') }}),

observations as (

    select
        c.*,
        i.item_members,
        i.unit_members,
        i.range_member,
        {{ fhir_id('ObservationChartevents', "c.stay_id || '-' || c.raw_charttime || '-' || c.itemid || '-' || c.raw_value") }}
            as id,
        p.id as patient_id,
        s.id as encounter_id
    from charts as c
    left join items as i on i.itemid = c.itemid and i.valueuom is not distinct from c.valueuom
    left join patients as p on p.subject_id = c.subject_id
    left join stays as s on s.stay_id = c.stay_id

)

select
    id, 'Observation' as resource_type, patient_id, 'chartevents' as source_table,
    to_json(struct_pack(stay_id := stay_id, charttime := raw_charttime, itemid := itemid, value := raw_value))
        as source_key,
    {{ observation_json }} as resource
from {{ fhir_rows_in_id_order('observations') }}
