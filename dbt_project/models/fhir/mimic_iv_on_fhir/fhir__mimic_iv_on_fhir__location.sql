{{ config(alias='location') }}
-- One Location per care unit of transfers (kind-lab/mimic-fhir sql/fhir_location.sql), id from the raw careunit.
with care_units as (

    select distinct careunit
    from {{ source('mimic_iv', 'transfers') }}
    where careunit is not null

),

units as (

    select careunit, {{ fhir_id('Location', 'careunit') }} as id from care_units

)

select
    id, 'Location' as resource_type, cast(null as varchar) as patient_id, 'transfers' as source_table,
    to_json(struct_pack(careunit := careunit)) as source_key,
    {{ fhir_json_object(
        on_fhir_head('Location', 'mimic-location'),
        fhir_json_required('status', fhir_json_constant('active')),
        fhir_json_required('name', fhir_json_string('careunit')),
        fhir_json_required('physicalType', fhir_json_concept(
            'http://terminology.hl7.org/CodeSystem/location-physical-type', "'wa'", "'Ward'")),
        fhir_json_required('managingOrganization', on_fhir_organization_reference())
    ) }} as resource
from {{ fhir_rows_in_id_order('units') }}
