{{ config(alias='medication_request') }}
-- FHIR MedicationRequests of the MIMIC-IV profiles' prescriptions: one per pharmacy_id of the EHRSQL-2024
-- intermediate prescriptions rows (namespace MedicationRequest, key pharmacy_id; a pharmacy_id with several drugs
-- has one row per drug there, all with the same times), referencing its Medication (the drug, or the mix of its
-- drugs) as MIMIC-IV on FHIR does. Shifted times as in the SQL databases: authoredOn and the validity period start
-- at starttime and end at stoptime (left out when it precedes the start, as MIMIC-IV on FHIR does). Status: the
-- intermediate model drops a stop time that lies after the current time, so a request with a stop time is
-- completed and one without is still active. One dosageInstruction per drug row (route and dose with MIMIC-IV's
-- original values, in file order; with several, each names its drug in its text).
with staged as (

    -- numbered in file order as in the intermediate model (file_row), for MIMIC-IV's original values
    select
        row_number() over () as file_row,
        pharmacy_id,
        drug,
        dose_val_rx,
        dose_unit_rx,
        route
    from {{ ref('stg_mimic_iv__prescriptions') }}

),

drug_rows as (

    select
        p.file_row,
        p.source_key,
        s.pharmacy_id,
        p.subject_id,
        p.hadm_id,
        p.starttime,
        p.stoptime,
        nullif(trim(s.drug), '') as drug,
        -- an all-digit dose once commas are removed (the intermediate model keeps only those)
        try_cast(replace(s.dose_val_rx, ',', '') as bigint) as dose_value,
        {{ fhir_med_code('s.dose_unit_rx') }} as dose_unit,
        {{ fhir_med_code('s.route') }} as route
    from {{ ref('int_ehrsql2024__mimic_iv__prescriptions') }} as p
    inner join staged as s
        on s.file_row = p.file_row and s.pharmacy_id = cast(p.source_key->>'pharmacy_id' as bigint)

),

dosages as (

    -- the members of one Dosage (text of zero or more members)
    select
        *,
        concat({{ fhir_json_optional('route', fhir_json_concept('mimic-medication-route', 'route')) }},
               {{ fhir_json_optional('doseAndRate', fhir_json_array(fhir_json_object(
                   fhir_json_optional('doseQuantity', fhir_json_quantity('dose_value', 'dose_unit'))))) }})
            as dosage_members
    from drug_rows

),

requests as (

    -- one Dosage per drug row; with several, each names its drug
    select
        pharmacy_id,
        any_value(source_key) as source_key,
        any_value(subject_id) as subject_id,
        any_value(hadm_id) as hadm_id,
        min(starttime) as starttime,
        max(stoptime) as stoptime,
        case when count(*) = 1 then {{ fhir_json_array(fhir_json_object('any_value(dosage_members)')) }}
             else {{ fhir_json_array_agg(fhir_json_object(fhir_json_optional('text', fhir_json_string('drug')),
                                                          'dosage_members'), 'file_row') }} end as dosage
    from dosages
    group by pharmacy_id

),

request_medications as (

    {{ fhir_prescription_drugs(requests_only=true) }}

),

medications as (

    -- one id per distinct Medication key
    select request_medication_key, {{ fhir_id('MedicationPrescriptions', 'request_medication_key') }} as medication_id
    from (select distinct request_medication_key from request_medications) as keys

),

patients as ({{ fhir_id_lookup('Patient', 'subject_id', ref('int_ehrsql2024__mimic_iv__prescriptions')) }}),

encounters as ({{ fhir_id_lookup('Encounter', 'hadm_id', ref('int_ehrsql2024__mimic_iv__prescriptions')) }}),

identified as (

    select
        r.*,
        {{ fhir_id('MedicationRequest', 'r.pharmacy_id') }} as id,
        m.medication_id,
        p.id as patient_id,
        p.reference as patient_reference,
        e.reference as encounter_reference
    from requests as r
    inner join request_medications as rm on rm.pharmacy_id = r.pharmacy_id
    inner join medications as m on m.request_medication_key = rm.request_medication_key
    inner join patients as p on p.subject_id = r.subject_id
    inner join encounters as e on e.hadm_id = r.hadm_id

)

select
    id, 'MedicationRequest' as resource_type, patient_id, 'prescriptions' as source_table, source_key,
    {{ fhir_json_object(
        fhir_json_required('resourceType', fhir_json_constant('MedicationRequest')),
        fhir_json_required('id', fhir_json_plain_string('id')),
        fhir_json_required('meta', fhir_json_meta('mimic-medication-request')),
        fhir_json_required('identifier', fhir_json_array(
            fhir_json_identifier('medication-request-phid', 'pharmacy_id', plain=true))),
        fhir_json_required('status', "case when stoptime is not null then " ~ fhir_json_constant('completed')
                                        ~ " else " ~ fhir_json_constant('active') ~ " end"),
        fhir_json_required('intent', fhir_json_constant('order')),
        fhir_json_required('medicationReference', fhir_json_reference('Medication', 'medication_id')),
        fhir_json_required('subject', 'patient_reference'),
        fhir_json_required('encounter', 'encounter_reference'),
        fhir_json_optional('authoredOn', fhir_json_datetime('starttime')),
        fhir_json_optional('dosageInstruction', 'dosage'),
        fhir_json_optional('dispenseRequest', fhir_json_object(fhir_json_optional('validityPeriod', fhir_json_period(
            'starttime', 'case when stoptime >= starttime then stoptime end', start_required=true))))
    ) }} as resource
from {{ fhir_rows_in_id_order('identified') }}
