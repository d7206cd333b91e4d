{{ config(alias='microbiology') }}
select
    microlabid as microbiology_id,
    patientunitstayid as unit_id,
    culturesite as culture_site,
    organism,
    culturetakentime as culture_taken_time
from {{ ref('int_renamed__eicu__microlab') }}
order by microbiology_id
