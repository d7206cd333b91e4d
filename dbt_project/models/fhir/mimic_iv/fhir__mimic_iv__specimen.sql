{{ config(alias='specimen') }}
-- FHIR Specimens of the microbiology specimens of the MIMIC-IV profiles (one per micro_specimen_id among the
-- EHRSQL-2024 microbiologyevents rows, collected at their shifted charttime), shaped like MIMIC-IV on FHIR's
-- SpecimenMicro: type coded by spec_itemid (code system mimic-spec-type-desc) with MIMIC-IV's original
-- spec_type_desc, also as its text. Id from micro_specimen_id.
{% set specimen_json %}
{{ fhir_json_object(
    fhir_json_required('resourceType', fhir_json_constant('Specimen')),
    fhir_json_required('id', fhir_json_plain_string('id')),
    fhir_json_required('meta', fhir_json_meta('mimic-specimen')),
    fhir_json_required('identifier', fhir_json_array(fhir_json_identifier('specimen-micro', 'micro_specimen_id', plain=true))),
    fhir_json_optional('type', fhir_json_concept('mimic-spec-type-desc', 'spec_itemid', 'spec_type_desc',
                                                 text_expr='spec_type_desc')),
    fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
    fhir_json_optional('collection', fhir_json_object(fhir_json_optional('collectedDateTime', fhir_json_datetime('charttime'))))
) }}
{% endset %}
with micro as (

    {{ fhir_micro_rows() }}

),

specimens as (

    select
        micro_specimen_id,
        max(spec_itemid) as spec_itemid,
        max(spec_type_desc) as spec_type_desc,
        max(charttime) as charttime,
        {{ fhir_id('SpecimenMicro', 'micro_specimen_id') }} as id,
        {{ fhir_id('Patient', 'max(subject_id)') }} as patient_id
    from micro
    group by micro_specimen_id

)

select
    id, 'Specimen' as resource_type, patient_id, 'microbiologyevents' as source_table,
    to_json(struct_pack(micro_specimen_id := micro_specimen_id)) as source_key,
    {{ specimen_json }} as resource
from specimens
