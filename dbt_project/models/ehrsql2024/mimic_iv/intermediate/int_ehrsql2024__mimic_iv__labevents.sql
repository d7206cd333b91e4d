-- Lab results with an admission, a numeric value and a unit, of items in d_labitems.
-- A unit of only whitespace (' ', e.g. specific gravity) is a unit '' in the published build (pandas
-- keeps it and strips it), unlike an empty field (NaN, dropped); staging turns both into NULL, so the
-- distinction is read from the source file here (int_ehrsql2024__mimic_iv__blank_text_cells). The row
-- is kept and its unit is NULL in the output (the '' becomes NaN when the build reloads its CSV).
with labs as (

    select *, row_number() over () as file_row
    from {{ ref('stg_mimic_iv__labevents') }}

),

blank_units as (

    select file_row from {{ ref('int_ehrsql2024__mimic_iv__blank_text_cells') }}
    where table_name = 'labevents' and column_name = 'valueuom'

),

shifted as (

    select
        l.file_row,
        l.subject_id,
        l.hadm_id,
        l.itemid,
        {{ mimic_iv_source_key(labevent_id='l.labevent_id') }} as source_key,
        {{ ehrsql2024_shift('l.charttime', 'o.offset_days') }} as charttime,
        l.valuenum,
        case
            when b.file_row is not null then ''
            else {{ ehrsql2024_text('l.valueuom') }}
        end as valueuom
    from labs as l
    left join blank_units as b on b.file_row = l.file_row
    left join {{ ref('int_ehrsql2024__mimic_iv__subject_offsets') }} as o on o.subject_id = l.subject_id
    where l.hadm_id in (select hadm_id from {{ ref('int_ehrsql2024__mimic_iv__admissions') }})
      and l.itemid in (select itemid from {{ ref('int_ehrsql2024__mimic_iv__d_labitems') }})
      and l.valuenum is not null

)

select
    file_row, source_key,
    subject_id, hadm_id, itemid, charttime, valuenum, {{ ehrsql2024_loaded('valueuom') }} as valueuom
from shifted
where valueuom is not null
  and charttime is not null
  and charttime >= {{ ehrsql2024_start() }}
