-- Medication orders of EHR-ChatQA's eICU database: drugname, dosage and routeadmin present, order not cancelled;
-- drugstarttime up to the current time (else dropped), drugstoptime NULL when after it (no lower bound); ids
-- renumbered 0..n-1 in medication.csv's row order.
with timed as (

    select
        medication.file_row,
        medication.medicationid as source_medicationid,
        medication.patientunitstayid,
        {{ ehrsql_eicu_text('medication.drugname') }} as drugname,
        {{ ehrsql_eicu_text('medication.dosage') }} as dosage,
        {{ ehrsql_eicu_text('medication.routeadmin') }} as routeadmin,
        {{ renamed_eicu_event_time('stays.unitadmittime', 'medication.drugstartoffset') }} as drugstarttime,
        {{ renamed_eicu_event_time('stays.unitadmittime', 'medication.drugstopoffset') }} as drugstoptime,
        medication.drugstartoffset,
        medication.drugstopoffset
    from ({{ renamed_eicu_file_rows('stg_eicu__medication') }}) as medication
    inner join {{ ref('int_renamed__eicu__patient') }} as stays using (patientunitstayid)
    where medication.drugname is not null
      and medication.dosage is not null
      and medication.routeadmin is not null
      and {{ ehrsql_eicu_text('medication.drugordercancelled') }} = 'no'

)

select
    cast(row_number() over (order by file_row) - 1 as integer) as medicationid,
    *
from timed
where drugstarttime is not null
