{{ config(alias='medication_administration') }}
-- FHIR MedicationAdministrations of the MIMIC-IV profiles' ICU inputs: one per EHRSQL-2024 intermediate inputevents
-- row (namespace MedicationAdministrationICU, key stay_id-orderid-itemid), in its ICU stay's Encounter, the item
-- coded as MIMIC-IV on FHIR codes inputevents items (mimic-medication-icu: itemid and its original-case label).
-- Times shifted as in the SQL databases (the end by the patient's same offset); an input whose shifted end lies
-- after the current time is still in progress and has no end yet. The dose is the total amount (the SQL
-- profiles' value) with its original unit; the rate when there is one.
with inputs as (

    select
        i.source_key,
        i.subject_id,
        i.stay_id,
        i.itemid,
        i.starttime,
        {{ ehrsql2024_shift('s.endtime', 'o.offset_days') }} as endtime,
        i.totalamount,
        {{ fhir_med_code('s.totalamountuom') }} as amount_unit,
        s.rate,
        {{ fhir_med_code('s.rateuom') }} as rate_unit,
        {{ fhir_med_code('s.ordercategoryname') }} as category_code,
        {{ fhir_med_code('s.ordercategorydescription') }} as method_code,
        nullif(trim(d.label), '') as label,
        i.stay_id || '-' || s.orderid || '-' || i.itemid as input_key
    from {{ ref('int_ehrsql2024__mimic_iv__inputevents') }} as i
    -- MIMIC-IV's original values: the staging row of the raw key stay_id-orderid-itemid (unique, as the id's key)
    inner join {{ ref('stg_mimic_iv__inputevents') }} as s
        on s.stay_id = i.stay_id and s.orderid = cast(i.source_key->>'orderid' as bigint) and s.itemid = i.itemid
    left join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = i.subject_id
    left join {{ ref('stg_mimic_iv__d_items') }} as d on d.itemid = i.itemid

),

patients as ({{ fhir_id_lookup('Patient', 'subject_id', ref('int_ehrsql2024__mimic_iv__inputevents')) }}),

icu_stays as ({{ fhir_id_lookup('EncounterICU', 'stay_id', ref('int_ehrsql2024__mimic_iv__inputevents'), 'Encounter') }}),

identified as (

    select
        inputs.*,
        {{ fhir_id('MedicationAdministrationICU', 'inputs.input_key') }} as id,
        p.id as patient_id,
        p.reference as patient_reference,
        e.reference as icu_encounter_reference
    from inputs
    inner join patients as p on p.subject_id = inputs.subject_id
    inner join icu_stays as e on e.stay_id = inputs.stay_id

)

select
    id, 'MedicationAdministration' as resource_type, patient_id, 'inputevents' as source_table, source_key,
    {{ fhir_json_object(
        fhir_json_required('resourceType', fhir_json_constant('MedicationAdministration')),
        fhir_json_required('id', fhir_json_plain_string('id')),
        fhir_json_required('meta', fhir_json_meta('mimic-medication-administration-icu')),
        fhir_json_required('identifier', fhir_json_array(
            fhir_json_identifier('medication-administration-icu', 'input_key', plain=true))),
        fhir_json_required('status', "case when endtime is null then " ~ fhir_json_constant('in-progress')
                                        ~ " else " ~ fhir_json_constant('completed') ~ " end"),
        fhir_json_optional('category', fhir_json_concept('mimic-medadmin-category-icu', 'category_code')),
        fhir_json_optional('medicationCodeableConcept', fhir_json_concept('mimic-medication-icu', 'itemid', 'label')),
        fhir_json_required('subject', 'patient_reference'),
        fhir_json_required('context', 'icu_encounter_reference'),
        fhir_json_optional('effectivePeriod', fhir_json_period('starttime', 'case when endtime >= starttime then endtime end',
                                                               start_required=true)),
        fhir_json_optional('dosage', fhir_json_object(
            fhir_json_optional('method', fhir_json_concept('mimic-medication-method-icu', 'method_code')),
            fhir_json_optional('dose', fhir_json_quantity('totalamount', 'amount_unit')),
            fhir_json_optional('rateQuantity', fhir_json_quantity('rate', 'rate_unit'))))
    ) }} as resource
from {{ fhir_rows_in_id_order('identified') }}
