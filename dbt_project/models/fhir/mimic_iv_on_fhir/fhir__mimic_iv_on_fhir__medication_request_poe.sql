{{ config(alias='medication_request_poe') }}
-- One MedicationRequest per POE order administered on the eMAR without a prescription (kind-lab/mimic-fhir
-- sql/fhir_medication_request.sql, part two): orders whose eMAR rows name a medication, or IV therapy and TPN
-- orders. The medication's name as code (else the order type), the order's status and time.
with orders as (

    select
        e.poe_id,
        min({{ on_fhir_code('e.medication') }}) as medication
    from {{ source('mimic_iv', 'emar') }} as e
    left join {{ source('mimic_iv', 'poe') }} as p on p.poe_id = e.poe_id
    where e.poe_id is not null
      and (e.pharmacy_id is null or e.pharmacy_id not in (select pharmacy_id from {{ source('mimic_iv', 'prescriptions') }}))
      and (e.medication is not null or p.order_type in ('TPN', 'IV therapy'))
    group by e.poe_id

),

requests as (

    select
        o.poe_id,
        o.medication,
        p.order_type,
        p.ordertime,
        coalesce(case p.order_status when 'Active' then 'active' when 'Inactive' then 'stopped' end, 'unknown') as status,
        {{ fhir_id('MedicationRequest', 'o.poe_id') }} as id,
        {{ fhir_id('Patient', 'p.subject_id') }} as patient_id,
        {{ fhir_id('Encounter', 'p.hadm_id') }} as encounter_id
    from orders as o
    inner join {{ source('mimic_iv', 'poe') }} as p on p.poe_id = o.poe_id

)

select
    id, 'MedicationRequest' as resource_type, patient_id, 'poe' as source_table,
    to_json(struct_pack(poe_id := poe_id)) as source_key,
    {{ fhir_json_object(
        on_fhir_head('MedicationRequest', 'mimic-medication-request'),
        fhir_json_required('identifier', fhir_json_array(fhir_json_identifier('medication-request-poe', 'poe_id'))),
        fhir_json_required('status', fhir_json_string('status')),
        fhir_json_required('intent', fhir_json_constant('order')),
        fhir_json_required('medicationCodeableConcept', "coalesce(" ~ fhir_json_concept('mimic-medication-name', 'medication')
            ~ ", " ~ fhir_json_concept('mimic-medication-poe-iv', 'order_type') ~ ")"),
        fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
        fhir_json_optional('encounter', fhir_json_reference('Encounter', 'encounter_id')),
        fhir_json_optional('authoredOn', on_fhir_datetime('ordertime'))
    ) }} as resource
from {{ fhir_rows_in_id_order('requests') }}
