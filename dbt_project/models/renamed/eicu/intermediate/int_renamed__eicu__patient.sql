-- The stays of EHR-ChatQA's eICU database: accepted unit stays with their shifted times (one row per unit stay).
-- unit admit time = sampled hospital admit date at hospitaladmittime24, minus hospitaladmitoffset minutes; every
-- other time = unit admit time + its offset. Stays admitted (to hospital or unit) after the current time are
-- dropped; later unit/hospital discharge times become NULL (a "current" stay), and a NULL hospital discharge time
-- also blanks hospitaldischargestatus and dischargeweight. Every patient is kept (no cohort sample). `age` is an
-- integer here; the SQLite export writes it as text, as EHR-ChatQA's database stores it
-- (BenchmarkDatabase.sqlite_text_columns).
with stays as (

    select * from {{ ref('int_renamed__eicu__unit_stays') }}
    where accepted

),

admit_dates as (

    select uniquepid, hospitaldischargeyear, visit_seq, sampled_first_year, hospitaladmitdate
    from {{ ref('int_renamed__eicu__admit_dates') }}

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
    file_row,
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
    {{ renamed_eicu_up_to_now('shifted_unitdischargetime') }} as unitdischargetime,
    {{ renamed_eicu_up_to_now('shifted_hospitaldischargetime') }} as hospitaldischargetime,
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
