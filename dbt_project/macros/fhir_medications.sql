{#- Domain macros of the FHIR medication models (Medication, MedicationRequest, MedicationAdministration):
    Medication keys and mixes of prescriptions, codes of MIMIC-IV's medication text. JSON: macros/fhir_json.sql. -#}

{#- A text value as a FHIR `code` (no leading/trailing whitespace, single inner spaces); NULL when empty. -#}
{% macro fhir_med_code(text_expr) -%}
    nullif(regexp_replace(trim({{ text_expr }}), '\s+', ' ', 'g'), '')
{%- endmacro %}

{#- The key of a prescriptions Medication as MIMIC-IV on FHIR makes it (namespace MedicationPrescriptions), from
    raw values: drug, then '--' || formulary_drug_cd when present, then '--' || ndc when present (an ndc of '0' is
    absent; a numeric-typed ndc is zero-filled back to its 11 digits). -#}
{% macro fhir_medication_key(drug, formulary_drug_cd, ndc) -%}
    (coalesce({{ drug }}, '')
     || case when {{ formulary_drug_cd }} is not null and {{ formulary_drug_cd }} <> ''
             then '--' || {{ formulary_drug_cd }} else '' end
     || case when {{ ndc }} is not null and cast({{ ndc }} as varchar) not in ('', '0')
             then '--' || lpad(cast({{ ndc }} as varchar), 11, '0') else '' end)
{%- endmacro %}

{#- The prescriptions drugs of a FHIR view: one row per raw prescriptions row of every pharmacy_id that has a
    MedicationRequest (those of requests_model, the EHRSQL-2024 intermediate prescriptions rows; every pharmacy_id
    without it), with raw key fields read from the source
    table (staging trims text, and the ids are made from the untrimmed values), the drug's Medication key and the
    request's Medication key. As in MIMIC-IV on FHIR (fhir_medication_request.sql, medication_mix.sql), a
    pharmacy_id with several prescriptions rows (e.g. a drug with its base bag) orders a mix: its key is the
    drugs' keys joined by '_' in drug_type descending (MIMIC-IV's MAIN, BASE, ADDITIVE), then drug order.
    drug_order is that order within the pharmacy_id, as a sortable value. requests_only=true: one row per pharmacy_id
    (pharmacy_id, request_medication_key, n_drugs) instead. -#}
{% macro fhir_prescription_drugs(requests_only=false, requests_model='int_ehrsql2024__mimic_iv__prescriptions') %}
    with drugs as (

        select
            r.pharmacy_id,
            r.drug_type,
            r.drug,
            r.formulary_drug_cd,
            r.ndc,
            {{ fhir_medication_key('r.drug', 'r.formulary_drug_cd', 'r.ndc') }} as medication_key
        from {{ source('mimic_iv', 'prescriptions') }} as r
        {% if requests_model -%}
        where r.pharmacy_id in (
            select cast(source_key->>'pharmacy_id' as bigint)
            from {{ ref(requests_model) }}
        )
        {%- endif %}

    ),

    ordered as (

        select
            *,
            struct_pack(
                drug_type := case drug_type when 'MAIN' then 0 when 'BASE' then 1 when 'ADDITIVE' then 2 else 3 end,
                drug := drug,
                medication_key := medication_key) as drug_order
        from drugs

    ),

    requests as (

        select
            pharmacy_id,
            case when count(*) = 1 then any_value(medication_key)
                 else {{ fhir_json_ordered_join('medication_key', 'drug_order', '_') }} end as request_medication_key,
            count(*) as n_drugs
        from ordered
        group by pharmacy_id

    )

    {% if requests_only -%}
    select * from requests
    {%- else -%}
    select ordered.*, requests.request_medication_key, requests.n_drugs
    from ordered
    inner join requests on requests.pharmacy_id = ordered.pharmacy_id
    {%- endif %}
{% endmacro %}

{#- The Medication resources of the prescriptions drugs of requests_model's pharmacy_ids (every pharmacy_id when
    none): one per drug and one per mix (see the models fhir__mimic_iv__medication, fhir__mimic_iv_on_fhir__medication).
    A model. -#}
{% macro fhir_medication_resources(requests_model) %}
{#- MIMIC-IV on FHIR identifies Medications with systems of its code systems -#}
{% set code_system = 'http://mimic.mit.edu/fhir/mimic/CodeSystem/' %}
with drugs as (

    {{ fhir_prescription_drugs(requests_model=requests_model) }}

),

distinct_drugs as (

    -- several raw spellings can make one key (an ndc '0', '' or missing; a formulary code '' or missing)
    select
        medication_key,
        min(drug) as drug,
        min(formulary_drug_cd) filter (where formulary_drug_cd <> '') as formulary_drug_cd,
        min(lpad(cast(ndc as varchar), 11, '0')) filter (where cast(ndc as varchar) not in ('', '0')) as ndc
    from drugs
    group by medication_key

),

coded_drugs as (

    select
        {{ fhir_id('MedicationPrescriptions', 'medication_key') }} as id,
        to_json(struct_pack(drug := drug, formulary_drug_cd := formulary_drug_cd, ndc := ndc)) as source_key,
        ndc,
        {{ fhir_med_code('formulary_drug_cd') }} as formulary_code,
        {{ fhir_med_code('drug') }} as name_code,
        nullif(trim(drug), '') as name
    from distinct_drugs

),

drug_resources as (

    select
        id,
        source_key,
        {{ fhir_json_object(
            fhir_json_required('resourceType', fhir_json_constant('Medication')),
            fhir_json_required('id', fhir_json_plain_string('id')),
            fhir_json_required('meta', fhir_json_meta('mimic-medication')),
            fhir_json_optional('identifier', fhir_json_array(
                fhir_json_identifier(code_system ~ 'mimic-medication-ndc', 'ndc'),
                fhir_json_identifier(code_system ~ 'mimic-medication-formulary-drug-cd', 'formulary_code'),
                fhir_json_identifier(code_system ~ 'mimic-medication-name', 'name'))),
            fhir_json_optional('code', fhir_json_object(
                fhir_json_optional('coding', fhir_json_array(
                    fhir_json_coding('http://hl7.org/fhir/sid/ndc', 'ndc'),
                    fhir_json_coding('mimic-medication-formulary-drug-cd', 'formulary_code'),
                    fhir_json_coding('mimic-medication-name', 'name_code'))),
                fhir_json_optional('text', fhir_json_string('name')))),
            fhir_json_required('status', fhir_json_constant('active'))
        ) }} as resource
    from coded_drugs

),

mixes as (

    -- the drugs of one pharmacy_id per mix key (every pharmacy_id of a key lists the same drugs), in key order
    select
        {{ fhir_id('MedicationPrescriptions', 'request_medication_key') }} as id,
        to_json(struct_pack(ingredients := list_transform(list_sort(list(struct_pack(
            k := drug_order, v := struct_pack(drug := drug, formulary_drug_cd := formulary_drug_cd, ndc := ndc)))),
            e -> e.v))) as source_key,
        {{ fhir_json_array_agg('ingredient', 'drug_order') }} as ingredients
    from (
        select
            *,
            {{ fhir_json_object(fhir_json_required('itemReference', fhir_json_reference(
                'Medication', fhir_id('MedicationPrescriptions', 'medication_key'), "nullif(trim(drug), '')"))) }}
                as ingredient
        from drugs
        where n_drugs > 1
        qualify dense_rank() over (partition by request_medication_key order by pharmacy_id) = 1
    ) as mix_drugs
    group by request_medication_key

),

-- the drugs' and the mixes' resources, sorted together (a few thousand)
medications as (

    select id, source_key, resource
    from drug_resources
    union all
    select
        id, source_key,
        {{ fhir_json_object(
            fhir_json_required('resourceType', fhir_json_constant('Medication')),
            fhir_json_required('id', fhir_json_plain_string('id')),
            fhir_json_required('meta', fhir_json_meta('mimic-medication')),
            fhir_json_required('status', fhir_json_constant('active')),
            fhir_json_required('ingredient', 'ingredients')
        ) }}
    from mixes

)

select id, 'Medication' as resource_type, cast(null as varchar) as patient_id, 'prescriptions' as source_table,
       source_key, resource
from {{ fhir_rows_in_id_order('medications') }}
{% endmacro %}
