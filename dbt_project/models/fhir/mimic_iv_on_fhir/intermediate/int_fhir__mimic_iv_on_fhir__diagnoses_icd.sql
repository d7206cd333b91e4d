-- Every diagnoses_icd row in the shape fhir_icd_event_resources reads (no time: a Condition has none).
select
    {{ mimic_iv_source_key(hadm_id='hadm_id', seq_num='seq_num', icd_code='icd_code', icd_version='icd_version') }}
        as source_key,
    subject_id,
    hadm_id,
    cast(null as timestamp) as charttime
from {{ source('mimic_iv', 'diagnoses_icd') }}
