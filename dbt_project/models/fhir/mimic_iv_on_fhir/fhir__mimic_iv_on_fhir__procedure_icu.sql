{{ config(alias='procedure_icu') }}
-- One Procedure per procedureevents key stay_id-orderid-itemid (kind-lab/mimic-fhir sql/fhir_procedure_icu.sql,
-- fhir_etl/map_status_procedure_icu.sql): the d_items item as code, the order category, the body site, the period,
-- the ICU stay as encounter; status from the event's status.
with events as (

    select
        e.*,
        d.label,
        {{ fhir_id('ProcedureICU', "e.stay_id || '-' || e.orderid || '-' || e.itemid") }} as id,
        {{ fhir_id('Patient', 'e.subject_id') }} as patient_id,
        {{ fhir_id('EncounterICU', 'e.stay_id') }} as encounter_id
    from (
        select
            subject_id, stay_id, orderid, itemid, starttime, endtime,
            case statusdescription when 'FinishedRunning' then 'completed' when 'Paused' then 'on-hold'
                                   when 'Stopped' then 'stopped' else 'unknown' end as status,
            {{ clean_text('ordercategoryname') }} as ordercategoryname,
            {{ on_fhir_code('location') }} as body_site
        from {{ source('mimic_iv', 'procedureevents') }}
        qualify row_number() over (partition by stay_id, orderid, itemid order by starttime, endtime) = 1
    ) as e
    left join {{ ref('stg_mimic_iv__d_items') }} as d on d.itemid = e.itemid

)

select
    id, 'Procedure' as resource_type, patient_id, 'procedureevents' as source_table,
    to_json(struct_pack(stay_id := stay_id, orderid := orderid, itemid := itemid)) as source_key,
    {{ fhir_json_object(
        on_fhir_head('Procedure', 'mimic-procedure-icu'),
        fhir_json_required('status', fhir_json_string('status')),
        fhir_json_optional('category', fhir_json_concept('mimic-procedure-category', 'ordercategoryname')),
        fhir_json_required('code', fhir_json_concept('mimic-d-items', 'itemid', 'label')),
        fhir_json_optional('bodySite', fhir_json_array(fhir_json_concept('mimic-bodysite', 'body_site'))),
        fhir_json_required('subject', fhir_json_reference('Patient', 'patient_id')),
        fhir_json_optional('encounter', fhir_json_reference('Encounter', 'encounter_id')),
        fhir_json_optional('performedPeriod', on_fhir_period('starttime', 'endtime'))
    ) }} as resource
from {{ fhir_rows_in_id_order('events') }}
