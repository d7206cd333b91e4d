-- Patients in scope of the audit extract: a seeded sample of `dq.patients` patients among those with admissions,
-- each with the time offset of the build's MIMIC-IV profiles (so the extract's times are the databases' times) and
-- a seeded day of birth within the birth year (a fixed day for everyone would itself look like an error).
with ranked as (

    select
        o.subject_id,
        o.offset_days,
        md5('{{ var("dq")["seed"] }}|scope|' || o.subject_id) as draw
    from {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o

)

select
    subject_id,
    offset_days,
    (('0x' || substr(md5('{{ var("dq")["seed"] }}|birth|' || subject_id), 1, 6))::bigint) % 365 as birth_day
from ranked
qualify row_number() over (order by draw) <= {{ var("dq")["patients"] }}
