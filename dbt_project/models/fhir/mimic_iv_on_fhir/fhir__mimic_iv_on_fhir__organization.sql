{{ config(alias='organization') }}
-- MIMIC-IV on FHIR's one Organization, the hospital every Patient, Location and Encounter names
-- (kind-lab/mimic-fhir sql/fhir_organization.sql). Id from its NPI (ehrbench.fhir.ids.ORGANIZATION_KEY).
with organization as (

    select {{ fhir_id('Organization', "'http://hl7.org/fhir/sid/us-npi/1194052720'") }} as id

)

select
    id, 'Organization' as resource_type, cast(null as varchar) as patient_id, cast(null as varchar) as source_table,
    cast(null as json) as source_key,
    {{ fhir_json_object(
        on_fhir_head('Organization', 'mimic-organization'),
        fhir_json_required('identifier', fhir_json_array(
            fhir_json_identifier('http://hl7.org/fhir/sid/us-npi', "'1194052720'", plain=true))),
        fhir_json_required('active', "'true'"),
        fhir_json_required('type', fhir_json_array(fhir_json_concept(
            'http://terminology.hl7.org/CodeSystem/organization-type', "'prov'", "'Healthcare Provider'"))),
        fhir_json_required('name', fhir_json_constant('Beth Israel Deaconess Medical Center'))
    ) }} as resource
from {{ fhir_rows_in_id_order('organization') }}
