{{ config(alias='medication_administration') }}
-- One MedicationAdministration per eMAR administration detail (emar_id-parent_field_ordinal; kind-lab/mimic-fhir
-- sql/fhir_medication_administration.sql) of a prescription, a named medication or an IV/TPN order: the product's
-- formulary code, else the medication's name, else the order type, else unknown; the request it carries out (the
-- prescription, else the POE order's request); when charted; the dose given (or the product amount when the
-- dose is 'N'/'INI'), the infusion rate, site, route and how (the eMAR event).
with details as (

    select
        emar_id,
        parent_field_ordinal,
        max(pharmacy_id) as pharmacy_id,
        max(dose_given) as dose_given,
        max({{ clean_text('dose_given_unit') }}) as dose_given_unit,
        max(product_amount_given) as product_amount_given,
        max({{ clean_text('product_unit') }}) as product_unit,
        max({{ on_fhir_code('product_code') }}) as product_code,
        max(try_cast(infusion_rate as double)) as infusion_rate,
        max({{ clean_text('infusion_rate_unit') }}) as infusion_rate_unit,
        max({{ on_fhir_code('site') }}) as site,
        max({{ clean_text('route') }}) as route
    from {{ source('mimic_iv', 'emar_detail') }}
    where parent_field_ordinal is not null
    group by emar_id, parent_field_ordinal

),

prescribed as (

    select distinct pharmacy_id from {{ source('mimic_iv', 'prescriptions') }}

),

poe_requests as (

    select cast(source_key->>'poe_id' as varchar) as poe_id, id from {{ ref('fhir__mimic_iv_on_fhir__medication_request_poe') }}

),

administrations as (

    select
        d.*,
        e.subject_id,
        e.hadm_id,
        e.charttime,
        {{ on_fhir_code('e.medication') }} as medication,
        {{ clean_text('e.event_txt') }} as event_txt,
        p.order_type,
        case when d.dose_given in ('N', 'INI') then try_cast(d.product_amount_given as double)
             else try_cast(d.dose_given as double) end as dose_value,
        case when d.dose_given in ('N', 'INI') then d.product_unit
             when try_cast(d.dose_given as double) is not null then d.dose_given_unit end as dose_unit,
        case when d.dose_given in ('N', 'INI') then null
             when try_cast(d.dose_given as double) is not null then '1'
             else nullif(concat('dose_given: ', d.dose_given, d.dose_given_unit), 'dose_given: ') end as dosage_text,
        case when pr.pharmacy_id is not null then {{ fhir_id('MedicationRequest', 'd.pharmacy_id') }}
             else r.id end as request_id,
        {{ fhir_id('MedicationAdministration', "d.emar_id || '-' || d.parent_field_ordinal") }} as id,
        {{ fhir_id('Patient', 'e.subject_id') }} as patient_id,
        {{ fhir_id('Encounter', 'e.hadm_id') }} as encounter_id
    from details as d
    left join {{ source('mimic_iv', 'emar') }} as e on e.emar_id = d.emar_id
    left join {{ source('mimic_iv', 'poe') }} as p on p.poe_id = e.poe_id
    left join prescribed as pr on pr.pharmacy_id = d.pharmacy_id
    left join poe_requests as r on r.poe_id = e.poe_id
    where pr.pharmacy_id is not null or e.medication is not null or p.order_type in ('TPN', 'IV therapy')

)

select
    id, 'MedicationAdministration' as resource_type, patient_id, 'emar_detail' as source_table,
    to_json(struct_pack(emar_id := emar_id, parent_field_ordinal := parent_field_ordinal)) as source_key,
    {{ fhir_json_object(
        on_fhir_head('MedicationAdministration', 'mimic-medication-administration'),
        fhir_json_required('identifier', fhir_json_array(fhir_json_identifier('medication-administration',
            "emar_id || '-' || parent_field_ordinal"))),
        fhir_json_required('status', fhir_json_constant('completed')),
        fhir_json_required('medicationCodeableConcept', "coalesce("
            ~ fhir_json_concept('mimic-medication-formulary-drug-cd', 'product_code') ~ ", "
            ~ fhir_json_concept('mimic-medication-name', 'medication') ~ ", "
            ~ fhir_json_concept('mimic-medication-poe-iv', 'order_type') ~ ", "
            ~ fhir_json_concept('http://terminology.hl7.org/CodeSystem/v3-NullFlavor', "'UNK'") ~ ")"),
        fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
        fhir_json_optional('context', fhir_json_reference('Encounter', 'encounter_id')),
        fhir_json_optional('effectiveDateTime', on_fhir_datetime('charttime')),
        fhir_json_optional('request', fhir_json_reference('MedicationRequest', 'request_id')),
        fhir_json_optional('dosage', "case when dose_value is not null or infusion_rate is not null then " ~ fhir_json_object(
            fhir_json_optional('text', fhir_json_string('dosage_text')),
            fhir_json_optional('site', fhir_json_concept('mimic-medication-site', 'site')),
            fhir_json_optional('route', fhir_json_concept('mimic-medication-route', 'route')),
            fhir_json_optional('method', fhir_json_concept('mimic-medication-method', 'event_txt')),
            fhir_json_optional('dose', fhir_json_quantity('dose_value', 'dose_unit')),
            fhir_json_optional('rateQuantity', fhir_json_quantity('infusion_rate', 'infusion_rate_unit'))) ~ " end")
    ) }} as resource
from {{ fhir_rows_in_id_order('administrations') }}
