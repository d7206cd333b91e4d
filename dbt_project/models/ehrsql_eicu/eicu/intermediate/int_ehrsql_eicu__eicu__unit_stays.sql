-- Unit stays that pass the published EHRSQL eICU cohort filters, with everything the time shift
-- needs: the processing order of the original per-patient loop, the stay's hospital visit rank
-- within its discharge year, and whether the loop reached (and accepted) the stay.
--
-- Filters, in the published order: hospitaladmitsource present; gender male/female; age "> 89"
-- read as 90, then age > 10; hospital stay (hospitaldischargeoffset - hospitaladmitoffset) below
-- its 95th percentile (linear interpolation, as numpy.percentile) over the stays left so far.
-- The loop visits a patient's stays by discharge year, then hospital stay (first appearance,
-- i.e. lowest patientunitstayid, as patient.csv is sorted by it), then unit stay; it stops at the
-- first stay whose offsets are inconsistent (not hospitaladmitoffset <= 0 < unitdischargeoffset
-- <= hospitaldischargeoffset): that stay and every later one of the patient get no time.
with staged as (

    select
        patientunitstayid,
        patienthealthsystemstayid,
        {{ ehrsql_eicu_text('uniquepid') }} as uniquepid,
        {{ ehrsql_eicu_text('gender') }} as gender,
        case
            when trim(age) = '> 89' then 90
            else try_cast(trim(age) as integer)
        end as source_age,
        {{ ehrsql_eicu_text('ethnicity') }} as ethnicity,
        hospitalid,
        wardid,
        admissionheight,
        admissionweight,
        dischargeweight,
        {{ ehrsql_eicu_text('hospitaladmitsource') }} as hospitaladmitsource,
        {{ ehrsql_eicu_text('hospitaldischargestatus') }} as hospitaldischargestatus,
        hospitaladmitoffset,
        hospitaladmittime24,
        unitdischargeoffset,
        hospitaldischargeoffset,
        hospitaldischargeyear
    from {{ ref('stg_eicu__patient') }}

),

eligible as (

    select *
    from staged
    where hospitaladmitsource is not null
      and gender in ('male', 'female')
      and source_age > 10

),

threshold as (

    select quantile_cont(hospitaldischargeoffset - hospitaladmitoffset, 0.95) as max_hospital_stay_minutes
    from eligible

),

kept as (

    select eligible.*
    from eligible
    cross join threshold
    where eligible.hospitaldischargeoffset - eligible.hospitaladmitoffset < threshold.max_hospital_stay_minutes

),

visits as (

    select
        uniquepid,
        hospitaldischargeyear,
        patienthealthsystemstayid,
        min(patientunitstayid) as first_patientunitstayid
    from kept
    group by uniquepid, hospitaldischargeyear, patienthealthsystemstayid

),

ranked_visits as (

    select
        *,
        row_number() over (
            partition by uniquepid, hospitaldischargeyear order by first_patientunitstayid
        ) - 1 as visit_seq,
        count(*) over (partition by uniquepid, hospitaldischargeyear) as visits_in_year
    from visits

),

ordered as (

    select
        kept.*,
        ranked_visits.visit_seq,
        ranked_visits.visits_in_year,
        coalesce(
            kept.hospitaladmitoffset <= 0
            and 0 < kept.unitdischargeoffset
            and kept.unitdischargeoffset <= kept.hospitaldischargeoffset,
            false
        ) as offsets_consistent,
        min(kept.patientunitstayid) over (partition by kept.uniquepid) as patient_order,
        min(kept.hospitaldischargeyear) over (partition by kept.uniquepid) as first_dischargeyear,
        min(kept.source_age) over (partition by kept.uniquepid) as first_age
    from kept
    inner join ranked_visits using (uniquepid, hospitaldischargeyear, patienthealthsystemstayid)

),

looped as (

    select
        *,
        bool_and(offsets_consistent) over (
            partition by uniquepid
            order by hospitaldischargeyear, visit_seq, patientunitstayid
            rows between unbounded preceding and current row
        ) as accepted,
        min(case when not offsets_consistent then hospitaldischargeyear end) over (
            partition by uniquepid
        ) as stopped_in_year
    from ordered

)

select
    uniquepid,
    patienthealthsystemstayid,
    patientunitstayid,
    gender,
    source_age,
    first_age + (hospitaldischargeyear - first_dischargeyear) as age,
    ethnicity,
    hospitalid,
    wardid,
    admissionheight,
    admissionweight,
    dischargeweight,
    hospitaladmitsource,
    hospitaldischargestatus,
    hospitaladmitoffset,
    hospitaladmittime24,
    unitdischargeoffset,
    hospitaldischargeoffset,
    hospitaldischargeyear,
    first_dischargeyear,
    patient_order,
    visit_seq,
    visits_in_year,
    offsets_consistent,
    accepted,
    -- the loop draws dates for a discharge year only if it did not stop in an earlier year
    stopped_in_year is null or hospitaldischargeyear <= stopped_in_year as year_reached
from looped
