-- Every microbiologyevents row in the shape fhir_micro_rows reads, at its charttime, else its chart date (the
-- published conversion's coalesce(charttime, chartdate)).
select
    {{ mimic_iv_source_key(microevent_id='microevent_id') }} as source_key,
    subject_id,
    hadm_id,
    coalesce(charttime, cast(chartdate as timestamp)) as charttime
from {{ source('mimic_iv', 'microbiologyevents') }}
