-- Unit stays of EHR-ChatQA's eICU database (docs/benchmarks.md#ehr-chatqa-eicu-database) with what the time shift
-- needs: the order of the published per-patient loop, each stay's hospital visit rank within its discharge year, and
-- whether the loop reached (and accepted) the stay.
--
-- Filters, in the published order: hospitaladmitsource present; gender male/female; age "> 89" read as 90, then
-- age > 10. Unlike EHRSQL (2022) there is no 95th-percentile hospital-stay filter.
-- The loop visits patients in order of first appearance in patient.csv, a patient's stays by discharge year, then
-- hospital stay (first appearance in the file), then unit stay (file order); it stops at the first stay whose
-- offsets are inconsistent (not hospitaladmitoffset <= 0 < unitdischargeoffset <= hospitaldischargeoffset): that
-- stay and every later one of the patient get no time.
with staged as (

    {{ renamed_eicu_file_rows('stg_eicu__patient') }}

),

typed as (

    select
        file_row,
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
    from staged

),

kept as (

    select *
    from typed
    where hospitaladmitsource is not null
      and gender in ('male', 'female')
      and source_age > 10

),

visits as (

    select
        uniquepid,
        hospitaldischargeyear,
        patienthealthsystemstayid,
        min(file_row) as first_file_row
    from kept
    group by uniquepid, hospitaldischargeyear, patienthealthsystemstayid

),

ranked_visits as (

    select
        *,
        row_number() over (partition by uniquepid, hospitaldischargeyear order by first_file_row) - 1 as visit_seq,
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
        min(kept.file_row) over (partition by kept.uniquepid) as patient_order,
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
            order by hospitaldischargeyear, visit_seq, file_row
            rows between unbounded preceding and current row
        ) as accepted,
        min(case when not offsets_consistent then hospitaldischargeyear end) over (
            partition by uniquepid
        ) as stopped_in_year
    from ordered

)

select
    file_row,
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
    -- the loop draws the dates of a discharge year only if it did not stop in an earlier year
    stopped_in_year is null or hospitaldischargeyear <= stopped_in_year as year_reached
from looped
