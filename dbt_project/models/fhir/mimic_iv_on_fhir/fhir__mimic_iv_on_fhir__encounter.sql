{{ config(alias='encounter') }}
-- Encounters as MIMIC-IV on FHIR makes them (kind-lab/mimic-fhir sql/fhir_encounter.sql, fhir_encounter_icu.sql,
-- fhir_etl/map_encounter_class.sql, map_encounter_priority.sql), raw times:
-- - one per admissions row (namespace Encounter): class and priority from the admission type, type from the
--   admission's HCPCS events (else SNOMED "Patient encounter procedure"), serviceType its first service, every
--   transfer with a care unit as a location (intime order);
-- - one per icustays row (namespace EncounterICU, partOf its admission): its first and (when another) last care
--   unit as locations, each with the span of that unit's transfers within the stay.
{% set hospital_json %}
{{ fhir_json_object(
    on_fhir_head('Encounter', 'mimic-encounter'),
    fhir_json_required('identifier', fhir_json_array("concat('{\"use\":\"usual\",\"system\":\"http://mimic.mit.edu/fhir/mimic/identifier/encounter-hosp\",\"value\":\"', hadm_id, '\",\"assigner\":', " ~ on_fhir_organization_reference() ~ ", '}')")),
    fhir_json_required('status', fhir_json_constant('finished')),
    fhir_json_optional('class', fhir_json_coding('http://terminology.hl7.org/CodeSystem/v3-ActCode', 'class_code', 'class_display')),
    fhir_json_required('type', "coalesce(hcpcs_types, '[{\"coding\":[{\"system\":\"http://snomed.info/sct\",\"code\":\"308335008\",\"display\":\"Patient encounter procedure\"}]}]')"),
    fhir_json_optional('serviceType', fhir_json_concept('mimic-services', 'service')),
    fhir_json_required('priority', fhir_json_concept('http://terminology.hl7.org/CodeSystem/v3-ActPriority', 'priority_code', 'priority_display')),
    fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
    fhir_json_optional('period', on_fhir_period('admittime', 'dischtime')),
    fhir_json_optional('hospitalization', fhir_json_object(
        fhir_json_optional('admitSource', fhir_json_concept('mimic-admit-source', 'admission_location')),
        fhir_json_optional('dischargeDisposition', fhir_json_concept('mimic-discharge-disposition', 'discharge_location')))),
    fhir_json_optional('location', 'locations'),
    fhir_json_required('serviceProvider', on_fhir_organization_reference())
) }}
{% endset %}
{% set icu_json %}
{{ fhir_json_object(
    on_fhir_head('Encounter', 'mimic-encounter'),
    fhir_json_required('identifier', fhir_json_array(fhir_json_identifier('encounter-icu', 'stay_id', plain=true))),
    fhir_json_required('status', fhir_json_constant('finished')),
    fhir_json_required('class', "'{\"system\":\"http://terminology.hl7.org/CodeSystem/v3-ActCode\",\"code\":\"ACUTE\"}'"),
    fhir_json_required('type', "'[{\"coding\":[{\"system\":\"http://snomed.info/sct\",\"code\":\"308335008\",\"display\":\"Patient encounter procedure\"}]}]'"),
    fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
    fhir_json_optional('period', on_fhir_period('intime', 'outtime')),
    fhir_json_optional('location', fhir_json_array('first_location', 'last_location')),
    fhir_json_required('partOf', fhir_json_reference('Encounter', 'hospital_encounter_id'))
) }}
{% endset %}
with transfers as (

    select
        hadm_id,
        transfer_id,
        careunit,
        intime,
        outtime,
        {{ fhir_id('Location', 'careunit') }} as location_id
    from {{ source('mimic_iv', 'transfers') }}
    where careunit is not null and hadm_id is not null

),

transfer_locations as (

    select
        hadm_id,
        {{ fhir_json_array_agg(fhir_json_object(
            fhir_json_required('location', fhir_json_reference('Location', 'location_id')),
            fhir_json_optional('period', on_fhir_period('intime', 'outtime'))),
            'struct_pack(intime := intime, transfer_id := transfer_id)') }} as locations
    from transfers
    group by hadm_id

),

hcpcs_types as (

    select
        e.hadm_id,
        {{ fhir_json_array_agg(fhir_json_concept('mimic-hcpcs-cd', 'e.hcpcs_cd', 'e.short_description'),
                               'struct_pack(seq_num := e.seq_num, code := e.hcpcs_cd)') }} as hcpcs_types
    from {{ source('mimic_iv', 'hcpcsevents') }} as e
    group by e.hadm_id

),

first_services as (

    select hadm_id, curr_service as service
    from {{ source('mimic_iv', 'services') }}
    qualify row_number() over (partition by hadm_id order by transfertime) = 1

),

admissions as (

    select
        a.hadm_id,
        a.admittime,
        a.dischtime,
        {{ clean_text('a.admission_location') }} as admission_location,
        {{ clean_text('a.discharge_location') }} as discharge_location,
        case when a.admission_type in ('EW EMER.', 'DIRECT EMER.') then 'EMER'
             when a.admission_type in ('URGENT', 'ELECTIVE', 'AMBULATORY OBSERVATION') then 'AMB'
             when a.admission_type in ('EU OBSERVATION', 'DIRECT OBSERVATION', 'OBSERVATION ADMIT') then 'OBSENC'
             when a.admission_type = 'SURGICAL SAME DAY ADMISSION' then 'SS' end as class_code,
        case when a.admission_type in ('EW EMER.', 'DIRECT EMER.') then 'emergency'
             when a.admission_type in ('URGENT', 'ELECTIVE', 'AMBULATORY OBSERVATION') then 'ambulatory'
             when a.admission_type in ('EU OBSERVATION', 'DIRECT OBSERVATION', 'OBSERVATION ADMIT') then 'observation encounter'
             when a.admission_type = 'SURGICAL SAME DAY ADMISSION' then 'short stay' end as class_display,
        case when a.admission_type in ('EW EMER.', 'DIRECT EMER.') then 'EM' when a.admission_type = 'URGENT' then 'UR'
             when a.admission_type = 'ELECTIVE' then 'EL' else 'R' end as priority_code,
        case when a.admission_type in ('EW EMER.', 'DIRECT EMER.') then 'emergency' when a.admission_type = 'URGENT' then 'urgent'
             when a.admission_type = 'ELECTIVE' then 'elective' else 'routine' end as priority_display,
        s.service,
        h.hcpcs_types,
        {{ fhir_id('Encounter', 'a.hadm_id') }} as id,
        {{ fhir_id('Patient', 'a.subject_id') }} as patient_id,
        l.locations
    from {{ source('mimic_iv', 'admissions') }} as a
    left join transfer_locations as l on l.hadm_id = a.hadm_id
    left join first_services as s on s.hadm_id = a.hadm_id
    left join hcpcs_types as h on h.hadm_id = a.hadm_id

),

-- the span of a care unit's transfers within an ICU stay, as one Encounter.location element
icu_units as (

    select
        i.stay_id,
        t.careunit,
        any_value(t.location_id) as location_id,
        {{ fhir_json_object(
            fhir_json_required('location', fhir_json_reference('Location', 'any_value(t.location_id)')),
            fhir_json_optional('period', on_fhir_period('min(t.intime)', 'max(t.outtime)'))) }} as element
    from {{ source('mimic_iv', 'icustays') }} as i
    inner join transfers as t
        on t.hadm_id = i.hadm_id and t.careunit in (i.first_careunit, i.last_careunit)
       and t.intime >= i.intime and t.outtime <= i.outtime
    group by i.stay_id, t.careunit

),

icu_stays as (

    select
        i.stay_id,
        i.intime,
        i.outtime,
        {{ fhir_id('EncounterICU', 'i.stay_id') }} as id,
        {{ fhir_id('Patient', 'i.subject_id') }} as patient_id,
        {{ fhir_id('Encounter', 'i.hadm_id') }} as hospital_encounter_id,
        f.element as first_location,
        case when i.last_careunit is distinct from i.first_careunit then l.element end as last_location
    from {{ source('mimic_iv', 'icustays') }} as i
    left join icu_units as f on f.stay_id = i.stay_id and f.careunit = i.first_careunit
    left join icu_units as l on l.stay_id = i.stay_id and l.careunit = i.last_careunit

),

{{ fhir_encounters_in_id_order(hospital_json, icu_json) }}
