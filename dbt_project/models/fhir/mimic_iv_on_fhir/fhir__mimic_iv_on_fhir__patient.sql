{{ config(alias='patient') }}
-- One Patient per patients row (kind-lab/mimic-fhir sql/fhir_patient.sql, fn_patient_extension.sql):
-- - birthDate: the date of the first transfer minus anchor_age years (none without transfers); deceasedDateTime:
--   the date of death;
-- - marital status (UNK when none), race and language of the latest admission; race and ethnicity as US Core extensions
--   (seed mimic_iv_on_fhir_race), then birth sex; like the conversion, no extension at all for a race it does not map;
-- - communication only for English.
with latest_admission as (

    select subject_id, min(marital_status) as marital_status, min(race) as race, min(language) as language
    from (
        select *
        from {{ source('mimic_iv', 'admissions') }}
        qualify admittime = max(admittime) over (partition by subject_id)
    ) as latest
    group by subject_id

),

first_transfer as (

    select subject_id, min(intime) as intime
    from {{ source('mimic_iv', 'transfers') }}
    group by subject_id

),

patients as (

    select
        p.subject_id,
        {{ fhir_id('Patient', 'p.subject_id') }} as id,
        case p.gender when 'F' then 'female' when 'M' then 'male' end as gender,
        p.gender as birth_sex,
        cast(cast(t.intime as date) - to_years(p.anchor_age) as date) as birth_date,
        p.dod,
        a.marital_status,
        case a.marital_status when 'MARRIED' then 'M' when 'SINGLE' then 'S' when 'WIDOWED' then 'W'
                              when 'DIVORCED' then 'D' end as marital_code,
        a.language,
        r.race_code,
        r.race_display,
        r.race_system,
        nullif(r.ethnicity_code, '') as ethnicity_code,
        nullif(r.ethnicity_display, '') as ethnicity_display
    from {{ source('mimic_iv', 'patients') }} as p
    left join latest_admission as a on a.subject_id = p.subject_id
    left join first_transfer as t on t.subject_id = p.subject_id
    left join {{ ref('mimic_iv_on_fhir_race') }} as r on r.race = a.race

)

select
    id, 'Patient' as resource_type, id as patient_id, 'patients' as source_table,
    to_json(struct_pack(subject_id := subject_id)) as source_key,
    {{ fhir_json_object(
        on_fhir_head('Patient', 'mimic-patient'),
        fhir_json_optional('extension', "case when race_code is not null then " ~ fhir_json_array(
            fhir_json_object(
                fhir_json_required('url', fhir_json_constant('http://hl7.org/fhir/us/core/StructureDefinition/us-core-race')),
                fhir_json_required('extension', fhir_json_array(
                    fhir_json_object(fhir_json_required('url', fhir_json_constant('ombCategory')),
                                     fhir_json_required('valueCoding', fhir_json_coding(none, 'race_code', 'race_display',
                                                                                         system_expr='race_system'))),
                    fhir_json_object(fhir_json_required('url', fhir_json_constant('text')),
                                     fhir_json_required('valueString', fhir_json_string('race_display')))))),
            "case when ethnicity_code is not null then " ~ fhir_json_object(
                fhir_json_required('url', fhir_json_constant('http://hl7.org/fhir/us/core/StructureDefinition/us-core-ethnicity')),
                fhir_json_required('extension', fhir_json_array(
                    fhir_json_object(fhir_json_required('url', fhir_json_constant('ombCategory')),
                                     fhir_json_required('valueCoding', fhir_json_coding(
                                        none, 'ethnicity_code', 'ethnicity_display',
                                        system_expr="'urn:oid:2.16.840.1.113883.6.238'"))),
                    fhir_json_object(fhir_json_required('url', fhir_json_constant('text')),
                                     fhir_json_required('valueString', fhir_json_string('ethnicity_display')))))) ~ " end",
            fhir_json_extension('http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex', 'valueCode',
                                fhir_json_string('birth_sex'))) ~ " end"),
        fhir_json_required('identifier', fhir_json_array(fhir_json_identifier('patient', 'subject_id', plain=true))),
        fhir_json_required('name', fhir_json_array("concat('{\"use\":\"official\",\"family\":\"Patient_', subject_id, '\"}')")),
        fhir_json_optional('gender', fhir_json_string('gender')),
        fhir_json_optional('birthDate', fhir_json_date('birth_date')),
        fhir_json_optional('deceasedDateTime', fhir_json_date('dod')),
        fhir_json_optional('maritalStatus', "case when marital_status is null then "
            ~ fhir_json_concept('http://terminology.hl7.org/CodeSystem/v3-NullFlavor', "'UNK'")
            ~ " else " ~ fhir_json_concept('http://terminology.hl7.org/CodeSystem/v3-MaritalStatus', 'marital_code') ~ " end"),
        fhir_json_optional('communication', "case when language = 'ENGLISH' then "
            ~ "'[{\"language\":{\"coding\":[{\"system\":\"urn:ietf:bcp:47\",\"code\":\"en\"}]}}]' end"),
        fhir_json_required('managingOrganization', on_fhir_organization_reference())
    ) }} as resource
from {{ fhir_rows_in_id_order('patients') }}
