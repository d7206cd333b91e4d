{{ config(alias='icupatient') }}
select
    uniquepid as patient_id,
    patienthealthsystemstayid as hosp_id,
    patientunitstayid as unit_id,
    gender,
    age,
    ethnicity,
    hospitalid as hospital_id,
    wardid as ward_id,
    admissionheight as height_admission,
    admissionweight as weight_admission,
    dischargeweight as weight_discharge,
    hospitaladmittime as hospital_admit_time,
    hospitaladmitsource as hospital_admission_source,
    unitadmittime as unit_admit_time,
    unitdischargetime as unit_discharge_time,
    hospitaldischargetime as hospital_discharge_time,
    hospitaldischargestatus as hospital_discharge_status
from {{ ref('int_renamed__eicu__patient') }}
order by patient_id
