-- The cohort: accepted unit stays with their shifted times (one row per unit stay).
-- unit admit time = sampled hospital admit date at hospitaladmittime24, minus hospitaladmitoffset
-- minutes; every other time = unit admit time + its offset. Stays admitted after the current
-- time are dropped; later unit/hospital discharge times become NULL (a "current" stay), and a
-- NULL hospital discharge time also blanks hospitaldischargestatus and dischargeweight.
with stays as (

    select * from {{ ref('int_ehrsql_eicu__eicu__unit_stays') }}
    where accepted

),

admit_dates as (

    select * from {{ ref('int_ehrsql_eicu__eicu__admit_dates') }}

),

shifted as (

    select
        stays.*,
        admit_dates.sampled_first_year,
        admit_dates.hospitaladmitdate,
        admit_dates.hospitaladmitdate + cast(stays.hospitaladmittime24 as time)
            - to_minutes(cast(stays.hospitaladmitoffset as bigint)) as shifted_unitadmittime
    from stays
    inner join admit_dates
        on stays.uniquepid = admit_dates.uniquepid
       and stays.hospitaldischargeyear = admit_dates.hospitaldischargeyear
       and stays.visit_seq = admit_dates.visit_seq

),

timed as (

    select
        *,
        {{ ehrsql_eicu_offset_time('shifted_unitadmittime', 'hospitaladmitoffset') }} as shifted_hospitaladmittime,
        {{ ehrsql_eicu_offset_time('shifted_unitadmittime', 'unitdischargeoffset') }} as shifted_unitdischargetime,
        {{ ehrsql_eicu_offset_time('shifted_unitadmittime', 'hospitaldischargeoffset') }} as shifted_hospitaldischargetime
    from shifted

)

select
    uniquepid,
    patienthealthsystemstayid,
    patientunitstayid,
    gender,
    age,
    source_age,
    ethnicity,
    hospitalid,
    wardid,
    admissionheight,
    admissionweight,
    case when shifted_hospitaldischargetime <= {{ ehrsql_eicu_current_time() }} then dischargeweight end as dischargeweight,
    shifted_hospitaladmittime as hospitaladmittime,
    hospitaladmitsource,
    shifted_unitadmittime as unitadmittime,
    case when shifted_unitdischargetime <= {{ ehrsql_eicu_current_time() }} then shifted_unitdischargetime end as unitdischargetime,
    case when shifted_hospitaldischargetime <= {{ ehrsql_eicu_current_time() }} then shifted_hospitaldischargetime end as hospitaldischargetime,
    case when shifted_hospitaldischargetime <= {{ ehrsql_eicu_current_time() }} then hospitaldischargestatus end as hospitaldischargestatus,
    -- lineage of the shift
    hospitaldischargeyear,
    sampled_first_year,
    hospitaladmitdate,
    hospitaladmittime24,
    hospitaladmitoffset,
    unitdischargeoffset,
    hospitaldischargeoffset
from timed
where shifted_hospitaladmittime <= {{ ehrsql_eicu_current_time() }}
  and shifted_unitadmittime <= {{ ehrsql_eicu_current_time() }}
