{{ config(alias='medication') }}
-- FHIR Medications of the prescriptions that the MIMIC-IV profiles' patients have a MedicationRequest for (namespace
-- MedicationPrescriptions, key drug[--formulary_drug_cd][--ndc] of raw values; see fhir_prescription_drugs):
-- one per drug of those prescriptions, identified and coded by NDC, formulary code and original-case name (as
-- MIMIC-IV on FHIR's identifiers; the NDC coding in HL7's NDC system), and one per mix (a pharmacy_id with several
-- drugs, e.g. a drug and its base bag) whose ingredients are its drugs. A Medication has no patient.
{#- MIMIC-IV on FHIR identifies Medications with systems of its code systems -#}
{% set code_system = 'http://mimic.mit.edu/fhir/mimic/CodeSystem/' %}
with drugs as (

    {{ fhir_prescription_drugs() }}

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

)

select id, 'Medication' as resource_type, cast(null as varchar) as patient_id, 'prescriptions' as source_table,
       source_key, resource
from drug_resources
union all
select
    id, 'Medication', null, 'prescriptions', source_key,
    {{ fhir_json_object(
        fhir_json_required('resourceType', fhir_json_constant('Medication')),
        fhir_json_required('id', fhir_json_plain_string('id')),
        fhir_json_required('meta', fhir_json_meta('mimic-medication')),
        fhir_json_required('status', fhir_json_constant('active')),
        fhir_json_required('ingredient', 'ingredients')
    ) }}
from mixes
