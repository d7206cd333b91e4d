{{ config(alias='medication_request') }}
-- One MedicationRequest per prescriptions pharmacy_id (kind-lab/mimic-fhir sql/fhir_medication_request.sql, part
-- one; map_medreq_status.sql, map_med_duration_unit.sql), with its pharmacy order: status from the pharmacy status
-- (else unknown; expired and changed orders 'stopped', the map's R4 version: a later one says R5's 'ended'), authored at the pharmacy's entertime, the Medication of its drug (or of the mix of its drugs), one
-- dosage instruction (strength, route, an all-digit dose, the frequency and duration, the hourly maximum) and the
-- validity period of the order. A pharmacy_id with several drug rows takes the greatest value of each field.
-- (The conversion's second part, requests of POE orders without a prescription, is not mapped yet.)
with prescriptions as (

    select
        pr.pharmacy_id,
        max(pr.subject_id) as subject_id,
        max(pr.hadm_id) as hadm_id,
        max(pr.starttime) as starttime,
        max(pr.stoptime) as stoptime,
        max({{ clean_text('pr.prod_strength') }}) as prod_strength,
        max(pr.route) as route,
        max(case when regexp_full_match(pr.dose_val_rx, '[0-9.]+') then try_cast(pr.dose_val_rx as double) end) as dose_value,
        max({{ clean_text('pr.dose_unit_rx') }}) as dose_unit
    from {{ source('mimic_iv', 'prescriptions') }} as pr
    group by pr.pharmacy_id

),

requests as (

    select
        pr.pharmacy_id,
        pr.subject_id,
        pr.hadm_id,
        pr.prod_strength,
        pr.dose_value,
        pr.dose_unit,
        {{ clean_text('coalesce(ph.route, pr.route)') }} as route,
{{ on_fhir_pharmacy_schedule('ph') }},
        coalesce(case ph.status
            when 'Discontinued via patient discharge' then 'completed' when 'Inactive (Due to a change order)' then 'stopped'
            when 'TPN Order (Acknowledged, Not Pumped)' then 'draft' when 'U' then 'unknown' when 'Expired' then 'stopped'
            when 'Active' then 'active' when 'Discontinued' then 'completed' when 'H' then 'unknown'
            when 'Inactive' then 'stopped' end, 'unknown') as status,
        ph.entertime,
        coalesce(ph.starttime, pr.starttime) as valid_from,
        coalesce(ph.stoptime, pr.stoptime) as valid_to
    from prescriptions as pr
    left join {{ source('mimic_iv', 'pharmacy') }} as ph on ph.pharmacy_id = pr.pharmacy_id

),

request_medications as (

    {{ fhir_prescription_drugs(requests_only=true, requests_model=none) }}

),

identified as (

    select
        r.*,
        {{ fhir_id('MedicationRequest', 'r.pharmacy_id') }} as id,
        {{ fhir_id('MedicationPrescriptions', 'm.request_medication_key') }} as medication_id,
        {{ fhir_id('Patient', 'r.subject_id') }} as patient_id,
        {{ fhir_id('Encounter', 'r.hadm_id') }} as encounter_id
    from requests as r
    inner join request_medications as m on m.pharmacy_id = r.pharmacy_id

)

select
    id, 'MedicationRequest' as resource_type, patient_id, 'prescriptions' as source_table,
    to_json(struct_pack(pharmacy_id := pharmacy_id)) as source_key,
    {{ fhir_json_object(
        on_fhir_head('MedicationRequest', 'mimic-medication-request'),
        fhir_json_required('identifier', fhir_json_array(
            fhir_json_identifier('medication-request-phid', 'pharmacy_id', plain=true))),
        fhir_json_required('status', fhir_json_string('status')),
        fhir_json_required('intent', fhir_json_constant('order')),
        fhir_json_required('medicationReference', fhir_json_reference('Medication', 'medication_id')),
        fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
        fhir_json_optional('encounter', fhir_json_reference('Encounter', 'encounter_id')),
        fhir_json_optional('authoredOn', on_fhir_datetime('entertime')),
        fhir_json_optional('dosageInstruction', fhir_json_array(fhir_json_object(
            fhir_json_optional('text', fhir_json_string('prod_strength')),
            on_fhir_dosage_timing(),
            fhir_json_optional('route', fhir_json_concept('mimic-medication-route', 'route')),
            fhir_json_optional('doseAndRate', fhir_json_array(fhir_json_object(
                fhir_json_optional('doseQuantity', fhir_json_quantity('dose_value', 'dose_unit'))))),
            on_fhir_dosage_max_per_hour()))),
        fhir_json_optional('dispenseRequest', "case when valid_from <= valid_to then " ~ fhir_json_object(
            fhir_json_required('validityPeriod', on_fhir_period('valid_from', 'valid_to'))) ~ " end")
    ) }} as resource
from {{ fhir_rows_in_id_order('identified') }}
