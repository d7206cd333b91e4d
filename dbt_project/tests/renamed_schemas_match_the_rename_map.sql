-- The renamed profile's tables and columns are exactly the published EHR-ChatQA names, in the published
-- column order (seed ehrchatqa_rename_map, in file order). Returns every table/column that differs.
-- Runs after every renamed model (dbt orders a test after the models it depends on):
-- depends_on: {{ ref('renamed__eicu__allergy_reaction') }}
-- depends_on: {{ ref('renamed__eicu__condition') }}
-- depends_on: {{ ref('renamed__eicu__cost') }}
-- depends_on: {{ ref('renamed__eicu__fluid_balance') }}
-- depends_on: {{ ref('renamed__eicu__hospital') }}
-- depends_on: {{ ref('renamed__eicu__icupatient') }}
-- depends_on: {{ ref('renamed__eicu__lab') }}
-- depends_on: {{ ref('renamed__eicu__microbiology') }}
-- depends_on: {{ ref('renamed__eicu__prescription') }}
-- depends_on: {{ ref('renamed__eicu__treatment') }}
-- depends_on: {{ ref('renamed__eicu__vital_signs') }}
-- depends_on: {{ ref('renamed__mimic_iv__admissiondiagnoses') }}
-- depends_on: {{ ref('renamed__mimic_iv__admissionprocedures') }}
-- depends_on: {{ ref('renamed__mimic_iv__clinicalevents') }}
-- depends_on: {{ ref('renamed__mimic_iv__clinicalitemtypes') }}
-- depends_on: {{ ref('renamed__mimic_iv__costrecords') }}
-- depends_on: {{ ref('renamed__mimic_iv__demographics') }}
-- depends_on: {{ ref('renamed__mimic_iv__diagnosiscodes') }}
-- depends_on: {{ ref('renamed__mimic_iv__hospitaladmissions') }}
-- depends_on: {{ ref('renamed__mimic_iv__icuepisodes') }}
-- depends_on: {{ ref('renamed__mimic_iv__intakerecords') }}
-- depends_on: {{ ref('renamed__mimic_iv__labresults') }}
-- depends_on: {{ ref('renamed__mimic_iv__labtesttypes') }}
-- depends_on: {{ ref('renamed__mimic_iv__medicationorders') }}
-- depends_on: {{ ref('renamed__mimic_iv__microbiologyresults') }}
-- depends_on: {{ ref('renamed__mimic_iv__outputrecords') }}
-- depends_on: {{ ref('renamed__mimic_iv__patienttransfers') }}
-- depends_on: {{ ref('renamed__mimic_iv__procedurecodes') }}

with expected as (

    select
        db as database_name,
        target_table as table_name,
        target_column as column_name,
        row_number() over (partition by db, target_table order by file_order) as position
    from (select *, row_number() over () as file_order from {{ ref('ehrchatqa_rename_map') }}) as seed

),

actual as (

    select
        replace(table_schema, 'renamed__', '') as database_name,
        table_name,
        column_name,
        ordinal_position as position
    from information_schema.columns
    where table_schema in ('renamed__mimic_iv', 'renamed__eicu')
      and table_catalog = current_database()

)

select
    coalesce(e.database_name, a.database_name) as database_name,
    coalesce(e.table_name, a.table_name) as table_name,
    e.column_name as expected_column,
    a.column_name as actual_column,
    coalesce(e.position, a.position) as position
from expected as e
full outer join actual as a
    on a.database_name = e.database_name and a.table_name = e.table_name and a.position = e.position
where e.column_name is distinct from a.column_name
