-- Orders with start, stop, dose, unit and route, an all-digit dose (commas removed, stored as an
-- integer as float text, '100.0'), and each drug's most frequent unit (ties: the unit seen first), computed over all
-- patients before the cohort filter. (The ehrsql2024 profile later drops drugs that the label-owner list
-- gives to another table; a drug's unit does not depend on other drugs, so the order of the two is free.)
with orders as (

    select
        row_number() over () as file_row,
        pharmacy_id,
        subject_id,
        hadm_id,
        starttime,
        stoptime,
        {{ ehrsql2024_text('drug') }} as drug,
        replace({{ ehrsql2024_text('dose_val_rx') }}, ',', '') as dose_digits,
        {{ ehrsql2024_text('dose_unit_rx') }} as dose_unit_rx,
        {{ ehrsql2024_text('route') }} as route
    from {{ ref('stg_mimic_iv__prescriptions') }}

),

usable as (

    select o.*
    from orders as o
    where o.starttime is not null
      and o.stoptime is not null
      and o.dose_digits is not null
      and o.dose_unit_rx is not null
      and o.route is not null
      and regexp_full_match(o.dose_digits, '[0-9]+')

),

drug_unit as (

    select drug, dose_unit_rx
    from (
        select drug, dose_unit_rx, count(*) as n_orders, min(file_row) as first_row
        from usable
        group by drug, dose_unit_rx
    ) as counted
    qualify row_number() over (partition by drug order by n_orders desc, first_row) = 1

),

shifted as (

    select
        u.file_row,
        {{ mimic_iv_source_key(pharmacy_id='u.pharmacy_id') }} as source_key,
        u.subject_id,
        u.hadm_id,
        {{ ehrsql2024_shift('u.starttime', 'o.offset_days') }} as starttime,
        {{ ehrsql2024_shift('u.stoptime', 'o.offset_days') }} as stoptime,
        u.drug,
        -- the original stores the integer in a float column: '100' becomes '100.0'
        cast(cast(u.dose_digits as hugeint) as varchar) || '.0' as dose_val_rx,
        u.dose_unit_rx,
        u.route
    from usable as u
    inner join drug_unit as du on du.drug is not distinct from u.drug and du.dose_unit_rx = u.dose_unit_rx
    left join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = u.subject_id
    where u.hadm_id in (select hadm_id from {{ ref('int_ehrsql2024__mimic_iv__admissions') }})

)

select
    file_row, source_key,
    subject_id, hadm_id, starttime, stoptime, {{ ehrsql2024_loaded('drug') }} as drug, dose_val_rx, {{ ehrsql2024_loaded('dose_unit_rx') }} as dose_unit_rx, {{ ehrsql2024_loaded('route') }} as route
from shifted
where starttime is not null
  and starttime >= {{ ehrsql2024_start() }}
