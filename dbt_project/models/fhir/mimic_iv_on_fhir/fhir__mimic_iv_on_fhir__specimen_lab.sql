{{ config(alias='specimen_lab') }}
-- One Specimen per lab specimen_id (kind-lab/mimic-fhir sql/fhir_specimen_lab.sql): the fluid of its (greatest)
-- item, collected at its latest charttime.
with specimens as (

    select specimen_id, max(itemid) as itemid, max(subject_id) as subject_id, max(charttime) as charttime
    from {{ source('mimic_iv', 'labevents') }}
    where specimen_id is not null
    group by specimen_id

),

identified as (

    select
        s.*,
        {{ clean_text('d.fluid') }} as fluid,
        {{ fhir_id('SpecimenLab', 's.specimen_id') }} as id,
        {{ fhir_id('Patient', 's.subject_id') }} as patient_id
    from specimens as s
    left join {{ ref('stg_mimic_iv__d_labitems') }} as d on d.itemid = s.itemid

)

select
    id, 'Specimen' as resource_type, patient_id, 'labevents' as source_table,
    to_json(struct_pack(specimen_id := specimen_id)) as source_key,
    {{ fhir_json_object(
        on_fhir_head('Specimen', 'mimic-specimen'),
        fhir_json_required('identifier', fhir_json_array(fhir_json_identifier('specimen-lab', 'specimen_id', plain=true))),
        fhir_json_optional('type', fhir_json_concept('mimic-lab-fluid', 'fluid')),
        fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
        fhir_json_optional('collection', fhir_json_object(fhir_json_optional('collectedDateTime', on_fhir_datetime('charttime'))))
    ) }} as resource
from {{ fhir_rows_in_id_order('identified') }}
