{{ config(alias='location') }}
-- FHIR Locations: one per care unit that the MIMIC-IV profiles' transfers pass through (namespace Location, key
-- careunit), named with MIMIC-IV's original value, as MIMIC-IV on FHIR makes them. A Location has no patient.
{% set location_json %}
{{ fhir_json_object(
    fhir_json_required('resourceType', fhir_json_constant('Location')),
    fhir_json_required('id', fhir_json_plain_string('id')),
    fhir_json_required('meta', fhir_json_meta('mimic-location')),
    fhir_json_required('status', fhir_json_constant('active')),
    fhir_json_optional('name', fhir_json_string('careunit')),
    fhir_json_required('physicalType', fhir_json_concept(
        'http://terminology.hl7.org/CodeSystem/location-physical-type', "'wa'", "'Ward'"))
) }}
{% endset %}
with care_units as (

    select distinct s.careunit
    from {{ ref('int_ehrsql2024__mimic_iv__transfers') }} as t
    inner join {{ ref('stg_mimic_iv__transfers') }} as s on s.transfer_id = t.transfer_id
    where s.careunit is not null

),

identified as (

    select careunit, {{ fhir_id('Location', 'careunit') }} as id
    from care_units

)

select
    id, 'Location' as resource_type, cast(null as varchar) as patient_id, 'transfers' as source_table,
    to_json(struct_pack(careunit := careunit)) as source_key,
    {{ location_json }} as resource
from {{ fhir_rows_in_id_order('identified') }}
