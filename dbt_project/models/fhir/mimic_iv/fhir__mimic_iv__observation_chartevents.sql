{{ config(alias='observation_chartevents') }}
-- FHIR Observations of the vital signs charted in the ICU (one per row of the EHRSQL-2024 chartevents: the nine
-- vital-sign items, same shifted charttime), shaped like MIMIC-IV on FHIR's ObservationChartevents (code system
-- mimic-chartevents-d-items, d_items category, d_items normal range) plus the HL7 vital-signs category. Original
-- MIMIC-IV label and unit (d_items' unitname, whose case the rows' units have; else the profile's unit). Id from the
-- raw key stay_id-charttime-itemid-value (charttime as PostgreSQL prints a timestamp). Full MIMIC-IV repeats a few
-- such keys (the same value charted twice at one time); like MIMIC-IV on FHIR, one resource per key: the first row.
{% set observation_json %}
{{ fhir_json_object(
    fhir_json_required('resourceType', fhir_json_constant('Observation')),
    fhir_json_required('id', fhir_json_plain_string('id')),
    fhir_json_required('meta', fhir_json_meta('mimic-observation-chartevents')),
    fhir_json_required('status', fhir_json_constant('final')),
    'item_members',
    fhir_json_required('subject', 'patient_reference'),
    fhir_json_optional('encounter', 'encounter_reference'),
    fhir_json_optional('effectiveDateTime', fhir_json_datetime('charttime')),
    fhir_json_optional('valueQuantity', fhir_json_quantity('valuenum', unit_members='unit_members')),
    'range_member'
) }}
{% endset %}
with charts as (

    select
        c.source_key,
        c.subject_id,
        c.hadm_id,
        c.stay_id,
        c.itemid,
        -- the raw key's charttime as PostgreSQL prints a timestamp (whole seconds: the key's JSON text)
        c.source_key->>'charttime' as raw_charttime,
        c.source_key->>'value' as raw_value,
        c.charttime,
        c.valuenum,
        c.valueuom as profile_valueuom
    from {{ ref('int_ehrsql2024__mimic_iv__chartevents') }} as c
    -- the first row of each key in file order, found by a grouping: numbering every row in a window partitioned by
    -- the key cost a quarter of this model
    where c.file_row in (
        select min(file_row)
        from {{ ref('int_ehrsql2024__mimic_iv__chartevents') }}
        group by stay_id, source_key->>'charttime', itemid, source_key->>'value'
    )

),

-- the JSON parts of an item (and the profile's lower-cased unit): category and code members, the Quantity's unit
-- members, the normal range member
items as (

    select
        itemid,
        profile_valueuom,
        concat(
            {{ fhir_json_required('category', fhir_json_array(
                fhir_observation_category('vital-signs'),
                fhir_json_concept('mimic-observation-category', 'category'))) }},
            {{ fhir_json_optional('code', fhir_json_concept('mimic-chartevents-d-items', 'itemid', 'label')) }}
        ) as item_members,
        {{ fhir_json_unit_members('valueuom') }} as unit_members,
        {{ fhir_json_optional('referenceRange', fhir_observation_reference_range(
            'lownormalvalue', 'highnormalvalue', fhir_json_unit_members('valueuom'))) }} as range_member
    from (
        select
            k.itemid,
            k.profile_valueuom,
            d.label,
            d.category,
            case when lower(d.unitname) = k.profile_valueuom then d.unitname else k.profile_valueuom end as valueuom,
            d.lownormalvalue,
            d.highnormalvalue
        from (select distinct itemid, profile_valueuom from charts) as k
        left join {{ ref('stg_mimic_iv__d_items') }} as d on d.itemid = k.itemid
    ) as dictionary

),

patients as ({{ fhir_id_lookup('Patient', 'subject_id', 'charts') }}),

-- the ICU stay's Encounter; the admission's if the stay is not in the profile (e.g. it would begin after "now")
stays as (

    select s.stay_id, coalesce(icu.reference, hospital.reference) as reference
    from (select distinct stay_id, hadm_id from charts) as s
    left join (
        {{ fhir_id_lookup('EncounterICU', 'stay_id', ref('int_ehrsql2024__mimic_iv__icustays'), 'Encounter') }}
    ) as icu on icu.stay_id = s.stay_id
    left join ({{ fhir_id_lookup('Encounter', 'hadm_id', 'charts') }}) as hospital on hospital.hadm_id = s.hadm_id

),

observations as (

    select
        charts.source_key,
        charts.charttime,
        charts.valuenum,
        items.item_members,
        items.unit_members,
        items.range_member,
        {{ fhir_id('ObservationChartevents',
                   "charts.stay_id || '-' || charts.raw_charttime || '-' || charts.itemid || '-' || charts.raw_value") }} as id,
        patients.id as patient_id,
        patients.reference as patient_reference,
        stays.reference as encounter_reference
    from charts
    left join items on items.itemid = charts.itemid and items.profile_valueuom is not distinct from charts.profile_valueuom
    left join patients on patients.subject_id = charts.subject_id
    left join stays on stays.stay_id = charts.stay_id

)

select
    id, 'Observation' as resource_type, patient_id, 'chartevents' as source_table, source_key,
    {{ observation_json }} as resource
from {{ fhir_rows_in_id_order('observations') }}
