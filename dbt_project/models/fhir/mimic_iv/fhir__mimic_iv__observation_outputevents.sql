{{ config(alias='observation_outputevents') }}
-- FHIR Observations of the ICU outputs (one per row of the EHRSQL-2024 outputevents, same shifted charttime), shaped
-- like MIMIC-IV on FHIR's ObservationOutputevents (code system mimic-d-items, d_items category, the amount as
-- valueQuantity). Original MIMIC-IV label and unit. Id from the raw key stay_id-charttime-itemid.
{% set observation_json %}
{{ fhir_json_object(
    fhir_json_required('resourceType', fhir_json_constant('Observation')),
    fhir_json_required('id', fhir_json_plain_string('id')),
    fhir_json_required('meta', fhir_json_meta('mimic-observation-outputevents')),
    fhir_json_required('status', fhir_json_constant('final')),
    'item_members',
    fhir_json_required('subject', 'patient_reference'),
    fhir_json_optional('encounter', 'encounter_reference'),
    fhir_json_optional('effectiveDateTime', fhir_json_datetime('charttime')),
    fhir_json_optional('valueQuantity', fhir_json_quantity('value', unit_members='unit_members'))
) }}
{% endset %}
with outputs as (

    select
        e.source_key,
        e.subject_id,
        e.hadm_id,
        e.stay_id,
        e.itemid,
        cast(e.source_key->>'charttime' as timestamp) as raw_charttime,
        e.charttime,
        e.value,
        e.valueuom as profile_valueuom
    from {{ ref('int_ehrsql2024__mimic_iv__outputevents') }} as e

),

-- the rows' units in their original case (one per raw key and unit, so that the join cannot multiply rows)
units as (

    select stay_id, charttime, itemid, lower(valueuom) as profile_valueuom, max(valueuom) as valueuom
    from {{ ref('stg_mimic_iv__outputevents') }}
    where stay_id in (select stay_id from outputs)
    group by stay_id, charttime, itemid, lower(valueuom)

),

events as (

    select outputs.*, coalesce(units.valueuom, outputs.profile_valueuom) as valueuom
    from outputs
    left join units
        on units.stay_id = outputs.stay_id and units.charttime = outputs.raw_charttime
       and units.itemid = outputs.itemid and units.profile_valueuom = outputs.profile_valueuom

),

-- the JSON parts of an item and unit, written once: category and code members (d_items), the unit members
items as (

    select
        k.itemid,
        k.valueuom,
        concat(
            {{ fhir_json_optional('category', fhir_json_array(fhir_json_concept('mimic-observation-category', 'd.category'))) }},
            {{ fhir_json_optional('code', fhir_json_concept('mimic-d-items', 'k.itemid', 'd.label')) }}
        ) as item_members,
        {{ fhir_json_unit_members('k.valueuom') }} as unit_members
    from (select distinct itemid, valueuom from events) as k
    left join {{ ref('stg_mimic_iv__d_items') }} as d on d.itemid = k.itemid

),

patients as ({{ fhir_id_lookup('Patient', 'subject_id', 'outputs') }}),

-- the ICU stay's Encounter; the admission's if the stay is not in the profile (e.g. it would begin after "now")
stays as (

    select s.stay_id, coalesce(icu.reference, hospital.reference) as reference
    from (select distinct stay_id, hadm_id from outputs) as s
    left join (
        {{ fhir_id_lookup('EncounterICU', 'stay_id', ref('int_ehrsql2024__mimic_iv__icustays'), 'Encounter') }}
    ) as icu on icu.stay_id = s.stay_id
    left join ({{ fhir_id_lookup('Encounter', 'hadm_id', 'outputs') }}) as hospital on hospital.hadm_id = s.hadm_id

),

observations as (

    select
        events.source_key,
        events.charttime,
        events.value,
        items.item_members,
        items.unit_members,
        {{ fhir_id('ObservationOutputevents',
                   "events.stay_id || '-' || strftime(events.raw_charttime, '%Y-%m-%d %H:%M:%S') || '-' || events.itemid") }} as id,
        patients.id as patient_id,
        patients.reference as patient_reference,
        stays.reference as encounter_reference
    from events
    left join items on items.itemid = events.itemid and items.valueuom is not distinct from events.valueuom
    left join patients on patients.subject_id = events.subject_id
    left join stays on stays.stay_id = events.stay_id

)

select
    id, 'Observation' as resource_type, patient_id, 'outputevents' as source_table, source_key,
    {{ observation_json }} as resource
from {{ fhir_rows_in_id_order('observations') }}
