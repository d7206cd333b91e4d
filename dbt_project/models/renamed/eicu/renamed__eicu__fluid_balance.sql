{{ config(alias='fluid_balance') }}
select
    intakeoutputid as fluid_balance_id,
    patientunitstayid as unit_id,
    cellpath as fluid_path,
    celllabel as fluid_label,
    cellvaluenumeric as fluid_value_numeric,
    intakeoutputtime as fluid_balance_time
from {{ ref('int_renamed__eicu__intakeoutput') }}
order by fluid_balance_id
