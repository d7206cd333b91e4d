{{ config(alias='patient') }}
-- FHIR Patient per patient of the MIMIC-IV profiles (the EHRSQL-2024 cohort, dates shifted as in the SQL
-- databases, so that SQL and FHIR questions share one "now"); original MIMIC-IV values.
{% set patient_json %}
{{ fhir_json_object(
    fhir_json_required('resourceType', fhir_json_constant('Patient')),
    fhir_json_required('id', fhir_json_plain_string('id')),
    fhir_json_required('meta', fhir_json_meta('mimic-patient')),
    fhir_json_required('identifier', fhir_json_array(fhir_json_identifier('patient', 'subject_id', plain=true))),
    fhir_json_required('gender', fhir_json_plain_string(
        "case gender when 'F' then 'female' when 'M' then 'male' else 'unknown' end")),
    fhir_json_optional('birthDate', fhir_json_plain_string("strftime(dob, '%Y-%m-%d')")),
    fhir_json_optional('deceasedDateTime', fhir_json_datetime('dod'))
) }}
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
    {{ patient_json }} as resource
from {{ fhir_rows_in_id_order('patients') }}
