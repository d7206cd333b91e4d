-- Every procedures_icd row in the shape fhir_icd_event_resources reads; its time is the chart date (midnight).
select
    {{ mimic_iv_source_key(hadm_id='hadm_id', seq_num='seq_num', icd_code='icd_code', icd_version='icd_version') }}
        as source_key,
    subject_id,
    hadm_id,
    cast(chartdate as timestamp) as charttime
from {{ source('mimic_iv', 'procedures_icd') }}
