{#- FHIR resource ids compatible with MIMIC-IV on FHIR (docs/benchmarks.md#fhir-resource-ids), computed in DuckDB:
    id = uuid5(<namespace UUID>, key) = the first 16 bytes of sha1(namespace bytes || key as UTF-8), with the
    version nibble set to 5 and the variant bits to 10xx. The namespace UUIDs are
    uuid5(uuid5(NAMESPACE_OID, 'MIMIC-IV'), <name>); tests/unit/test_fhir_ids.py checks them and the SQL against
    Python's uuid module (ehrbench.fhir.ids). Plain Jinja only, so the unit test can render it. -#}
{% macro fhir_id(namespace_name, key_expr) -%}
    {%- set namespaces = {
        'Patient': '569c1027384a58ff84f20338bab99bc1',
        'Encounter': 'd7fa6dd29b235b5db1687af91f8e57dd',
        'EncounterICU': '8e98050b8d6a55a7ba3761ee31586de2',
        'Condition': '84a8d272eb205c12b8260573a0ef963c',
        'Procedure': '59be3a283d745ca6a55a2aad2c609f44',
        'MedicationRequest': '98678637e68d5c5eba10bf8fc4689d42',
        'MedicationPrescriptions': 'ed950805f5fc50648fce175c1b1011b1',
        'ObservationLabevents': 'b11d3a3ed96055edb310381e40cba32b',
        'ObservationChartevents': '36e18860b4aa5577bc80a5b07922cd3d',
        'ObservationOutputevents': '6fbc4f89807651ed9f733ee0b9f8b3f7',
        'MedicationAdministrationICU': '0fb8354e6d2a5e7ca70818d4f4d5e1a4',
        'ObservationMicroTest': '0bd41cbdc4495942b3ff6add8a252df7',
        'ObservationMicroOrg': '463fcc1c1e105303ad1aa358959da4fa',
        'ObservationMicroSusc': 'f329a1f139e355d7a1f2e3c70a8e371b',
        'SpecimenMicro': 'd84c089c24e4504cbd48a7f183049f58',
        'Location': 'ef6e778f19da5a13875f01c97838b003',
        'Organization': '0b10fe39a14f599385269e46bcc25153',
        'ProcedureICU': '7d31e702a0615b3895c6ae66d39c7fd2',
        'SpecimenLab': '23d61b09a7bf5507a1cd61a144c1b2d6',
        'ObservationDatetimeevents': '2289d97d407d58279ae4d504b9f6c064',
        'MedicationDispense': '515bdebd5be252bf929e183e439b554c',
        'MedicationAdministration': '07df8aa70779500ba65f79a52a59be22',
    } -%}
    {%- set digest = "sha1(from_hex('" ~ namespaces[namespace_name] ~ "') || encode(cast(" ~ key_expr ~ " as varchar)))" -%}
    (substr({{ digest }}, 1, 8) || '-' || substr({{ digest }}, 9, 4) || '-5' || substr({{ digest }}, 14, 3) || '-'
     || case when substr({{ digest }}, 17, 1) in ('0', '4', '8', 'c') then '8'
             when substr({{ digest }}, 17, 1) in ('1', '5', '9', 'd') then '9'
             when substr({{ digest }}, 17, 1) in ('2', '6', 'a', 'e') then 'a'
             else 'b' end
     || substr({{ digest }}, 18, 3) || '-' || substr({{ digest }}, 21, 12))
{%- endmacro %}

{#- A FHIR model's rows in id order, as the final select's relation: `from {{ fhir_rows_in_id_order('rows') }}`.
    The export writes each model's rows as stored (ehrbench.fhir.export, which checks the order), so every FHIR model
    ends with this: sorting the narrow rows before their JSON is built costs a fraction of sorting the resources
    afterwards (the x10 scale-up's chartevents: +0.6 s here against +3.5 s in the export; at x100 this sort spills
    too, +28 s on that model, and the whole build still gained 82 s, README "Performance"). -#}
{% macro fhir_rows_in_id_order(rows) -%}
    (select * from {{ rows }} order by id) as {{ rows }}
{%- endmacro %}

{#- The end of an Encounter model (both views): its hospital Encounters (CTE `admissions`) and ICU Encounters (CTE
    `icu_stays`), each row written with its view's JSON, sorted together. -#}
{% macro fhir_encounters_in_id_order(hospital_json, icu_json) -%}
encounters as (

    select
        id, 'Encounter' as resource_type, patient_id, 'admissions' as source_table,
        to_json(struct_pack(hadm_id := hadm_id)) as source_key,
        {{ hospital_json }} as resource
    from admissions
    union all
    select
        id, 'Encounter', patient_id, 'icustays', to_json(struct_pack(stay_id := stay_id)),
        {{ icu_json }}
    from icu_stays

)

select * from {{ fhir_rows_in_id_order('encounters') }}
{%- endmacro %}

{#- A FHIR dateTime. FHIR needs a zone offset once a time is given. The EHRSQL-aligned view writes its (shifted,
    local) times with -04:00, so that wall-clock times read the same as in the SQL databases. zone='America/New_York'
    writes raw times as MIMIC-IV on FHIR does (PostgreSQL's cast to timestamptz in that session zone): the offset of
    the date, -05:00 or -04:00; a time in the spring-forward gap reads one hour later, an ambiguous fall-back time
    takes standard time (ICU's rules, the same as PostgreSQL's). Whole-hour offsets only. json=true: as a JSON
    string. -#}
{% macro fhir_datetime(timestamp_expr, json=false, zone=none) -%}
    {%- set quote = '"' if json else '' -%}
    {%- if zone is none -%}
    strftime({{ timestamp_expr }}, '{{ quote }}%Y-%m-%dT%H:%M:%S-04:00{{ quote }}')
    {%- else -%}
    {%- set instant = "timezone('" ~ zone ~ "', cast(" ~ timestamp_expr ~ " as timestamp))" -%}
    {%- set wall_clock = "timezone('" ~ zone ~ "', " ~ instant ~ ")" -%}
    (strftime({{ wall_clock }}, '{{ quote }}%Y-%m-%dT%H:%M:%S')
     || printf('%+03d:00{{ quote }}', date_diff('hour', timezone('UTC', {{ instant }}), {{ wall_clock }})))
    {%- endif -%}
{%- endmacro %}

{#- Condition (diagnoses_icd) and Procedure (procedures_icd) resources: one per coded event of events_model (the
    EHRSQL-2024 preprocessing's rows, or every raw row for the mimic_iv_on_fhir view, which also gives the profile
    and the zone of its times), with MIMIC-IV's raw ICD code and its original-case title;
    ids from the raw key hadm_id-seq_num-icd_code. Procedures also carry their (shifted) time. The code member is
    written once per distinct code, patient and encounter ids once per key (macros/fhir_json.sql). -#}
{% macro fhir_icd_event_resources(resource_type, events_model, dictionary_model, code_system_stem, profile=none,
                                 zone=none) %}
{%- if resource_type == 'Condition' -%}
    {%- set kind_members = [fhir_json_required('category', fhir_json_array(fhir_json_concept(
        'http://terminology.hl7.org/CodeSystem/condition-category', "'encounter-diagnosis'",
        "'Encounter Diagnosis'" if profile else none)))] -%}
{%- else -%}
    {%- set kind_members = [fhir_json_required('status', fhir_json_constant('completed')),
                            fhir_json_optional('performedDateTime', fhir_json_datetime('charttime', zone))] -%}
{%- endif -%}
{%- set members = [fhir_json_required('resourceType', fhir_json_constant(resource_type)),
                   fhir_json_required('id', fhir_json_plain_string('id'))]
                  + ([fhir_json_required('meta', fhir_json_meta(profile))] if profile else [])
                  + kind_members
                  + ['code_member',
                     fhir_json_optional('subject', 'subject_reference'),
                     fhir_json_optional('encounter', 'encounter_reference')] %}
with events as (

    select
        source_key,
        subject_id,
        hadm_id,
        charttime,
        source_key->>'icd_code' as icd_code,
        cast(source_key->>'icd_version' as integer) as icd_version,
        {{ fhir_id(resource_type, "hadm_id || '-' || (source_key->>'seq_num') || '-' || (source_key->>'icd_code')") }} as id
    from {{ ref(events_model) }}

),

-- the code member, once per code
codes as (

    select
        k.icd_code,
        k.icd_version,
        {{ fhir_json_optional('code', fhir_json_concept(none, 'k.icd_code', 'd.long_title',
            system_expr="'http://mimic.mit.edu/fhir/mimic/CodeSystem/" ~ code_system_stem ~ "' || k.icd_version")) }}
            as code_member
    from (select distinct icd_code, icd_version from events) as k
    left join {{ ref(dictionary_model) }} as d on d.icd_code = k.icd_code and d.icd_version = k.icd_version

),

patients as ({{ fhir_id_lookup('Patient', 'subject_id', 'events') }}),

admissions as ({{ fhir_id_lookup('Encounter', 'hadm_id', 'events') }}),

identified as (

    select
        e.id,
        e.source_key,
        e.charttime,
        c.code_member,
        p.id as patient_id,
        p.reference as subject_reference,
        h.reference as encounter_reference
    from events as e
    left join codes as c on c.icd_code = e.icd_code and c.icd_version = e.icd_version
    left join patients as p on p.subject_id = e.subject_id
    left join admissions as h on h.hadm_id = e.hadm_id

)

select
    id, '{{ resource_type }}' as resource_type, patient_id,
    '{{ events_model.split("__")[-1] }}' as source_table, source_key,
    {{ fhir_json_object(*members) }} as resource
from {{ fhir_rows_in_id_order('identified') }}
{% endmacro %}
