{{ config(alias='medication_dispense') }}
-- One MedicationDispense per pharmacy row with a medication (kind-lab/mimic-fhir sql/fhir_medication_dispense.sql):
-- the medication's name as its code, the admission as its context, the prescription it fills (when the pharmacy_id
-- has one), the filled quantity when it reads as a number with an optional unit, route and timing as dosage.
with dispenses as (

    select
        ph.pharmacy_id,
        ph.subject_id,
        ph.hadm_id,
        {{ on_fhir_code('ph.medication') }} as medication,
        {{ clean_text('ph.route') }} as route,
{{ on_fhir_pharmacy_schedule('ph') }},
        try_cast(regexp_extract(ph.fill_quantity, '^\s*#?(\d+(\.\d+)?)\s*''*(|ml|bottle|btl|g|lb)''*\s*$', 1) as double)
            as quantity,
        nullif(replace(regexp_extract(ph.fill_quantity, '^\s*#?(\d+(\.\d+)?)\s*''*(|ml|bottle|btl|g|lb)''*\s*$', 3),
                       'btl', 'bottle'), '') as quantity_unit,
        {{ fhir_id('MedicationDispense', 'ph.pharmacy_id') }} as id,
        {{ fhir_id('Patient', 'ph.subject_id') }} as patient_id,
        {{ fhir_id('Encounter', 'ph.hadm_id') }} as encounter_id,
        case when ph.pharmacy_id in (select pharmacy_id from {{ source('mimic_iv', 'prescriptions') }})
             then {{ fhir_id('MedicationRequest', 'ph.pharmacy_id') }} end as request_id
    from {{ source('mimic_iv', 'pharmacy') }} as ph
    where ph.medication is not null

)

select
    id, 'MedicationDispense' as resource_type, patient_id, 'pharmacy' as source_table,
    to_json(struct_pack(pharmacy_id := pharmacy_id)) as source_key,
    {{ fhir_json_object(
        on_fhir_head('MedicationDispense', 'mimic-medication-dispense'),
        fhir_json_required('identifier', fhir_json_array(fhir_json_identifier('medication-dispense', 'pharmacy_id', plain=true))),
        fhir_json_required('status', fhir_json_constant('completed')),
        fhir_json_required('medicationCodeableConcept', fhir_json_concept('mimic-medication-name', 'medication')),
        fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
        fhir_json_optional('context', fhir_json_reference('Encounter', 'encounter_id')),
        fhir_json_optional('authorizingPrescription', fhir_json_array(fhir_json_reference('MedicationRequest', 'request_id'))),
        fhir_json_optional('quantity', "case when quantity is not null then concat('{\"value\":', "
            ~ fhir_json_number('quantity') ~ ", ',\"unit\":' || " ~ fhir_json_string('quantity_unit') ~ ", '}') end"),
        fhir_json_optional('dosageInstruction', fhir_json_array(fhir_json_object(
            on_fhir_dosage_timing(),
            fhir_json_optional('route', fhir_json_concept('mimic-medication-route', 'route')),
            on_fhir_dosage_max_per_hour())))
    ) }} as resource
from {{ fhir_rows_in_id_order('dispenses') }}
