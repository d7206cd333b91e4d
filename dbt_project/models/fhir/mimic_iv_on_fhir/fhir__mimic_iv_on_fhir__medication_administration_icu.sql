{{ config(alias='medication_administration_icu') }}
-- One MedicationAdministration per inputevents key stay_id-orderid-itemid (kind-lab/mimic-fhir
-- sql/fhir_medication_administration_icu.sql): the d_items item as the medication, the ICU stay as context, the
-- order category; a rate makes it a period (start to end) with the rate, else it happened at its end time.
with inputs as (

    select
        i.*,
        d.label,
        {{ fhir_id('MedicationAdministrationICU', "i.stay_id || '-' || i.orderid || '-' || i.itemid") }} as id,
        {{ fhir_id('Patient', 'i.subject_id') }} as patient_id,
        {{ fhir_id('EncounterICU', 'i.stay_id') }} as encounter_id
    from (
        select
            subject_id, stay_id, orderid, itemid, starttime, endtime, amount, rate,
            {{ clean_text('amountuom') }} as amountuom,
            {{ clean_text('rateuom') }} as rateuom,
            {{ clean_text('ordercategoryname') }} as ordercategoryname,
            {{ clean_text('ordercategorydescription') }} as ordercategorydescription
        from {{ source('mimic_iv', 'inputevents') }}
        qualify row_number() over (partition by stay_id, orderid, itemid order by starttime, endtime) = 1
    ) as i
    left join {{ ref('stg_mimic_iv__d_items') }} as d on d.itemid = i.itemid

)

select
    id, 'MedicationAdministration' as resource_type, patient_id, 'inputevents' as source_table,
    to_json(struct_pack(stay_id := stay_id, orderid := orderid, itemid := itemid)) as source_key,
    {{ fhir_json_object(
        on_fhir_head('MedicationAdministration', 'mimic-medication-administration-icu'),
        fhir_json_required('identifier', fhir_json_array(fhir_json_identifier('medication-administration-icu',
            "stay_id || '-' || orderid || '-' || itemid", plain=true))),
        fhir_json_required('status', fhir_json_constant('completed')),
        fhir_json_optional('category', fhir_json_concept('mimic-medadmin-category-icu', 'ordercategoryname')),
        fhir_json_required('medicationCodeableConcept', fhir_json_concept('mimic-medication-icu', 'itemid', 'label')),
        fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
        fhir_json_optional('context', fhir_json_reference('Encounter', 'encounter_id')),
        fhir_json_optional('effectivePeriod', "case when rate is not null then " ~ on_fhir_period('starttime', 'endtime') ~ " end"),
        fhir_json_optional('effectiveDateTime', "case when rate is null then " ~ on_fhir_datetime('endtime') ~ " end"),
        fhir_json_optional('dosage', fhir_json_object(
            fhir_json_optional('method', fhir_json_concept('mimic-medication-method-icu', 'ordercategorydescription')),
            fhir_json_optional('dose', fhir_json_quantity('amount', 'amountuom')),
            fhir_json_optional('rateQuantity', fhir_json_quantity('rate', 'rateuom'))))
    ) }} as resource
from {{ fhir_rows_in_id_order('inputs') }}
