{{ config(alias='encounter') }}
-- FHIR Encounters of the MIMIC-IV profiles' patients: one per hospital admission (namespace Encounter) and one
-- per ICU stay (EncounterICU, partOf its admission). Times shifted as in the SQL databases; a current
-- admission or stay (no discharge yet) is in-progress. Original MIMIC-IV values. A hospital Encounter lists the care
-- units of its transfers (Locations, by shifted intime; no end while the patient is still there); an ICU Encounter
-- names the Location of its first care unit.
{% set hospital_json %}
{{ fhir_json_object(
    fhir_json_required('resourceType', fhir_json_constant('Encounter')),
    fhir_json_required('id', fhir_json_plain_string('id')),
    fhir_json_required('meta', fhir_json_meta('mimic-encounter')),
    fhir_json_required('identifier', fhir_json_array(fhir_json_identifier('encounter-hosp', 'hadm_id', plain=true))),
    fhir_json_required('status', "case when dischtime is null then " ~ fhir_json_constant('in-progress')
                                    ~ " else " ~ fhir_json_constant('finished') ~ " end"),
    fhir_json_required('class', fhir_json_coding('http://terminology.hl7.org/CodeSystem/v3-ActCode', "'IMP'",
                                                 "'inpatient encounter'")),
    fhir_json_optional('type', fhir_json_array(fhir_json_concept('mimic-admission-type', 'admission_type'))),
    fhir_json_optional('subject', fhir_json_reference('Patient', 'patient_id')),
    fhir_json_optional('period', fhir_json_period('admittime', 'dischtime')),
    fhir_json_optional('hospitalization', fhir_json_object(
        fhir_json_optional('admitSource', fhir_json_concept('mimic-admit-source', 'admission_location')),
        fhir_json_optional('dischargeDisposition', fhir_json_concept('mimic-discharge-disposition', 'discharge_location')))),
    fhir_json_optional('location', 'locations')
) }}
{% endset %}
{% set icu_json %}
{{ fhir_json_object(
    fhir_json_required('resourceType', fhir_json_constant('Encounter')),
    fhir_json_required('id', fhir_json_plain_string('id')),
    fhir_json_required('meta', fhir_json_meta('mimic-encounter-icu')),
    fhir_json_required('identifier', fhir_json_array(fhir_json_identifier('encounter-icu', 'stay_id', plain=true))),
    fhir_json_required('status', "case when outtime is null then " ~ fhir_json_constant('in-progress')
                                    ~ " else " ~ fhir_json_constant('finished') ~ " end"),
    fhir_json_required('class', fhir_json_coding('http://terminology.hl7.org/CodeSystem/v3-ActCode', "'ACUTE'",
                                                 "'inpatient acute'")),
    fhir_json_optional('type', fhir_json_array(fhir_json_object(fhir_json_optional('text', fhir_json_string('first_careunit'))))),
    fhir_json_optional('subject', fhir_json_reference('Patient', 'patient_id')),
    fhir_json_optional('partOf', fhir_json_reference('Encounter', 'hospital_encounter_id')),
    fhir_json_optional('period', fhir_json_period('intime', 'outtime')),
    fhir_json_optional('location', fhir_json_array(fhir_json_object(fhir_json_optional('location',
        fhir_json_reference('Location', 'location_id', 'first_careunit')))))
) }}
{% endset %}
with transfers as (

    select
        t.hadm_id,
        t.transfer_id,
        t.intime,
        t.outtime,
        s.careunit,
        {{ fhir_id('Location', 's.careunit') }} as location_id
    from {{ ref('int_ehrsql2024__mimic_iv__transfers') }} as t
    inner join {{ ref('stg_mimic_iv__transfers') }} as s on s.transfer_id = t.transfer_id
    where s.careunit is not null

),

-- Encounter.location of an admission: one element per transfer, in intime order
transfer_locations as (

    select
        hadm_id,
        {{ fhir_json_array_agg(fhir_json_object(
            fhir_json_required('location', fhir_json_reference('Location', 'location_id', 'careunit')),
            fhir_json_optional('period', fhir_json_period('intime', 'outtime'))),
            'struct_pack(intime := intime, transfer_id := transfer_id)') }} as locations
    from transfers
    group by hadm_id

),

care_units as (

    select distinct careunit, location_id
    from transfers

),

admissions as (

    select
        a.hadm_id,
        a.admittime,
        a.dischtime,
        s.admission_type,
        s.admission_location,
        case when a.dischtime is not null then s.discharge_location end as discharge_location,
        {{ fhir_id('Encounter', 'a.hadm_id') }} as id,
        {{ fhir_id('Patient', 'a.subject_id') }} as patient_id,
        l.locations
    from {{ ref('int_ehrsql2024__mimic_iv__admissions') }} as a
    inner join {{ ref('stg_mimic_iv__admissions') }} as s on s.hadm_id = a.hadm_id
    left join transfer_locations as l on l.hadm_id = a.hadm_id

),

icu_stays as (

    select
        i.stay_id,
        i.intime,
        i.outtime,
        s.first_careunit,
        {{ fhir_id('EncounterICU', 'i.stay_id') }} as id,
        {{ fhir_id('Patient', 'i.subject_id') }} as patient_id,
        {{ fhir_id('Encounter', 'i.hadm_id') }} as hospital_encounter_id,
        c.location_id
    from {{ ref('int_ehrsql2024__mimic_iv__icustays') }} as i
    inner join {{ ref('stg_mimic_iv__icustays') }} as s on s.stay_id = i.stay_id
    left join care_units as c on c.careunit = s.first_careunit

),

{{ fhir_encounters_in_id_order(hospital_json, icu_json) }}
