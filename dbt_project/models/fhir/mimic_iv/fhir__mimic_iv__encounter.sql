{{ config(alias='encounter') }}
-- FHIR Encounters of the MIMIC-IV profiles' patients: one per hospital admission (namespace Encounter) and one
-- per ICU stay (EncounterICU, partOf its admission). Times shifted as in the SQL databases; a current
-- admission or stay (no discharge yet) is in-progress. Original MIMIC-IV values.
{% set hospital_json %}
json_object(
    'resourceType', 'Encounter',
    'id', id,
    'meta', json_object('profile', json_array('http://mimic.mit.edu/fhir/mimic/StructureDefinition/mimic-encounter')),
    'identifier', json_array(json_object(
        'system', 'http://mimic.mit.edu/fhir/mimic/identifier/encounter-hosp', 'value', cast(hadm_id as varchar))),
    'status', case when dischtime is null then 'in-progress' else 'finished' end,
    'class', json_object('system', 'http://terminology.hl7.org/CodeSystem/v3-ActCode', 'code', 'IMP',
                         'display', 'inpatient encounter'),
    'type', case when admission_type is not null then json_array(json_object('coding', json_array(json_object(
        'system', 'http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-admission-type', 'code', admission_type)))) end,
    'subject', json_object('reference', 'Patient/' || patient_id),
    'period', json_object('start', {{ fhir_datetime('admittime') }}, 'end', {{ fhir_datetime('dischtime') }}),
    'hospitalization', json_object(
        'admitSource', case when admission_location is not null then json_object('coding', json_array(json_object(
            'system', 'http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-admit-source',
            'code', admission_location))) end,
        'dischargeDisposition', case when discharge_location is not null then json_object('coding', json_array(
            json_object('system', 'http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-discharge-disposition',
                        'code', discharge_location))) end)
)
{% endset %}
{% set icu_json %}
json_object(
    'resourceType', 'Encounter',
    'id', id,
    'meta', json_object('profile', json_array('http://mimic.mit.edu/fhir/mimic/StructureDefinition/mimic-encounter-icu')),
    'identifier', json_array(json_object(
        'system', 'http://mimic.mit.edu/fhir/mimic/identifier/encounter-icu', 'value', cast(stay_id as varchar))),
    'status', case when outtime is null then 'in-progress' else 'finished' end,
    'class', json_object('system', 'http://terminology.hl7.org/CodeSystem/v3-ActCode', 'code', 'ACUTE',
                         'display', 'inpatient acute'),
    'type', case when first_careunit is not null then json_array(json_object('text', first_careunit)) end,
    'subject', json_object('reference', 'Patient/' || patient_id),
    'partOf', json_object('reference', 'Encounter/' || hospital_encounter_id),
    'period', json_object('start', {{ fhir_datetime('intime') }}, 'end', {{ fhir_datetime('outtime') }})
)
{% endset %}
with admissions as (

    select
        a.hadm_id,
        a.admittime,
        a.dischtime,
        s.admission_type,
        s.admission_location,
        case when a.dischtime is not null then s.discharge_location end as discharge_location,
        {{ fhir_id('Encounter', 'a.hadm_id') }} as id,
        {{ fhir_id('Patient', 'a.subject_id') }} as patient_id
    from {{ ref('int_ehrsql2024__mimic_iv__admissions') }} as a
    inner join {{ ref('stg_mimic_iv__admissions') }} as s on s.hadm_id = a.hadm_id

),

icu_stays as (

    select
        i.stay_id,
        i.intime,
        i.outtime,
        s.first_careunit,
        {{ fhir_id('EncounterICU', 'i.stay_id') }} as id,
        {{ fhir_id('Patient', 'i.subject_id') }} as patient_id,
        {{ fhir_id('Encounter', 'i.hadm_id') }} as hospital_encounter_id
    from {{ ref('int_ehrsql2024__mimic_iv__icustays') }} as i
    inner join {{ ref('stg_mimic_iv__icustays') }} as s on s.stay_id = i.stay_id

)

select
    id, 'Encounter' as resource_type, patient_id, 'admissions' as source_table,
    to_json(struct_pack(hadm_id := hadm_id)) as source_key,
    {{ fhir_resource(hospital_json) }} as resource
from admissions
union all
select
    id, 'Encounter', patient_id, 'icustays', to_json(struct_pack(stay_id := stay_id)),
    {{ fhir_resource(icu_json) }}
from icu_stays
order by id
