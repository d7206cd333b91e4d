{{ config(alias='patient') }}
-- EHRSQL eICU `patient`: one row per unit stay of the cohort (columns and order as the published eicu.sql).

select
    uniquepid,
    patienthealthsystemstayid,
    patientunitstayid,
    gender,
    age,
    ethnicity,
    hospitalid,
    wardid,
    admissionheight,
    admissionweight,
    dischargeweight,
    hospitaladmittime,
    hospitaladmitsource,
    unitadmittime,
    unitdischargetime,
    hospitaldischargetime,
    hospitaldischargestatus
from {{ ref('int_ehrsql_eicu__eicu__patient') }}
order by patientunitstayid
