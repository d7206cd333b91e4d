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

{#- The prescriptions drugs of the FHIR view: one row per raw prescriptions row of every pharmacy_id that has a
    MedicationRequest (the EHRSQL-2024 intermediate prescriptions rows), with raw key fields read from the source
    table (staging trims text, and the ids are made from the untrimmed values), the drug's Medication key and the
    request's Medication key. As in MIMIC-IV on FHIR (fhir_medication_request.sql, medication_mix.sql), a
    pharmacy_id with several prescriptions rows (e.g. a drug with its base bag) orders a mix: its key is the
    drugs' keys joined by '_' in drug_type descending (MIMIC-IV's MAIN, BASE, ADDITIVE), then drug order.
    drug_order is that order within the pharmacy_id, as a sortable value. requests_only=true: one row per pharmacy_id
    (pharmacy_id, request_medication_key, n_drugs) instead. -#}
{% macro fhir_prescription_drugs(requests_only=false) %}
    with drugs as (

        select
            r.pharmacy_id,
            r.drug_type,
            r.drug,
            r.formulary_drug_cd,
            r.ndc,
            {{ fhir_medication_key('r.drug', 'r.formulary_drug_cd', 'r.ndc') }} as medication_key
        from {{ source('mimic_iv', 'prescriptions') }} as r
        where r.pharmacy_id in (
            select cast(source_key->>'pharmacy_id' as bigint)
            from {{ ref('int_ehrsql2024__mimic_iv__prescriptions') }}
        )

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
