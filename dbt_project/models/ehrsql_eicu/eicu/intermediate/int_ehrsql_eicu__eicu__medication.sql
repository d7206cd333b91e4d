-- Medication orders of the cohort: drugname, dosage and routeadmin present, order not cancelled;
-- drugstarttime inside the time window (else dropped), drugstoptime NULL when outside it.
with timed as (

    select
        medication.medicationid as source_medicationid,
        medication.patientunitstayid,
        {{ ehrsql_eicu_text('medication.drugname') }} as drugname,
        {{ ehrsql_eicu_text('medication.dosage') }} as dosage,
        {{ ehrsql_eicu_text('medication.routeadmin') }} as routeadmin,
        {{ ehrsql_eicu_bounded(ehrsql_eicu_offset_time('cohort.unitadmittime', 'medication.drugstartoffset')) }} as drugstarttime,
        {{ ehrsql_eicu_bounded(ehrsql_eicu_offset_time('cohort.unitadmittime', 'medication.drugstopoffset')) }} as drugstoptime,
        medication.drugstartoffset,
        medication.drugstopoffset
    from {{ ref('stg_eicu__medication') }} as medication
    inner join {{ ref('int_ehrsql_eicu__eicu__patient') }} as cohort using (patientunitstayid)
    where medication.drugname is not null
      and medication.dosage is not null
      and medication.routeadmin is not null
      and {{ ehrsql_eicu_text('medication.drugordercancelled') }} = 'no'

)

select
    cast(row_number() over (order by source_medicationid) - 1 as integer) as medicationid,
    *
from timed
where drugstarttime is not null
