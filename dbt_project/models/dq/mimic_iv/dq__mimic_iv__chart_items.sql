{{ config(alias='chart_items') }}
-- The bedside-chart dictionary of the extract's categories (vital signs, respiratory, point-of-care labs), with the
-- unit and normal range the chart system declares.
select
    itemid as item_code,
    label as name,
    abbreviation,
    category,
    nullif(unitname, 'None') as unit,  -- the dictionary writes a missing unit as the text None
    lownormalvalue as low_normal,
    highnormalvalue as high_normal
from {{ ref('stg_mimic_iv__d_items') }}
where linksto = 'chartevents'
  and category in ('Routine Vital Signs', 'Respiratory', 'Labs')
  and param_type = 'Numeric'
