{{ config(alias='patient') }}
-- FHIR Patient per patient of the MIMIC-IV profiles (the EHRSQL-2024 cohort, dates shifted as in the SQL
-- databases, so that SQL and FHIR questions share one "now"); original MIMIC-IV values.
{% set patient_json %}
json_object(
    'resourceType', 'Patient',
    'id', id,
    'meta', json_object('profile', json_array('http://mimic.mit.edu/fhir/mimic/StructureDefinition/mimic-patient')),
    'identifier', json_array(json_object(
        'system', 'http://mimic.mit.edu/fhir/mimic/identifier/patient', 'value', cast(subject_id as varchar))),
    'gender', case gender when 'F' then 'female' when 'M' then 'male' else 'unknown' end,
    'birthDate', strftime(dob, '%Y-%m-%d'),
    'deceasedDateTime', {{ fhir_datetime('dod') }}
)
{% endset %}
with patients as (

    select
        p.subject_id,
        p.dob,
        p.dod,
        s.gender,
        {{ fhir_id('Patient', 'p.subject_id') }} as id
    from {{ ref('int_ehrsql2024__mimic_iv__patients') }} as p
    inner join {{ ref('stg_mimic_iv__patients') }} as s on s.subject_id = p.subject_id

)

select
    id,
    'Patient' as resource_type,
    id as patient_id,
    'patients' as source_table,
    to_json(struct_pack(subject_id := subject_id)) as source_key,
    {{ fhir_resource(patient_json) }} as resource
from patients
order by id
