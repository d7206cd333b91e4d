-- Every eICU-CRD row as MEDS events, as the eICU-MEDS ETL 0.1.0 writes them (Medical-Event-Data-Standard/eICU_MEDS,
-- configs/event_configs.yaml on MEDS-Extract 0.7; docs/benchmarks.md#meds-export). eICU has no dates: a unit stay is
-- anchored at 31 December of its hospitaldischargeyear at hospitaldischargetime24 (the hospital discharge), its unit
-- admission is hospitaldischargeoffset minutes before, and every other time is the unit admission plus the table's
-- offset in minutes. The subject is the health-system stay (patienthealthsystemstayid). A code component with
-- `?? 'UNK'` there is coalesced here; a bare one (DIAGNOSIS) makes the code null and the event is dropped, as is an
-- event without a time (static events aside). The rows are the files' (macro meds_raw_file): a quoted empty string
-- stays an empty component (GENDER//), a null one is UNK. Each event kind's rows are de-duplicated over its columns
-- with the ETL's extra columns (ward_id, medication_id, ...), as MEDS-Extract de-duplicates them; only hadm_id and
-- icustay_id are exported.
with patient as (

    select * from {{ meds_raw_file('eicu', 'patient') }}

),

hospital as (

    select * from {{ meds_raw_file('eicu', 'hospital') }}

),

anchored as (

    select
        p.*,
        h.numbedscategory,
        h.teachingstatus,
        h.region,
        strptime(p.hospitaldischargeyear || '-12-31 ' || p.hospitaldischargetime24, '%Y-%m-%d %H:%M:%S')
            as hospitaldischargetimestamp
    from patient as p
    left join hospital as h on h.hospitalid = p.hospitalid

),

stays as (

    select
        *,
        hospitaldischargetimestamp - to_minutes(cast(hospitaldischargeoffset as bigint)) as unitadmittimestamp,
        case when age = '> 89' then 90.0 when regexp_full_match(age, '[0-9]+') then cast(age as double) end
            as age_in_years
    from anchored

),

stay_times as (

    select
        *,
        unitadmittimestamp + to_minutes(cast(unitdischargeoffset as bigint)) as unitdischargetimestamp,
        unitadmittimestamp + to_minutes(cast(hospitaladmitoffset as bigint)) as hospitaladmittimestamp
    from stays

),

-- the unit admission of each unit stay, and its subject: what every other table's offsets count from
anchors as (

    select patientunitstayid, cast(patienthealthsystemstayid as bigint) as subject_id, unitadmittimestamp
    from stays

),

{%- set tables = ['admissiondx', 'allergy', 'careplangeneral', 'careplaneol', 'careplangoal',
                  'careplaninfectiousdisease', 'diagnosis', 'infusiondrug', 'lab', 'medication', 'treatment',
                  'vitalaperiodic', 'vitalperiodic'] %}
{%- for table in tables %}

{{ table }} as (

    select t.*, a.subject_id, a.unitadmittimestamp
    from {{ meds_raw_file('eicu', table) }} as t
    join anchors as a on a.patientunitstayid = cast(t.patientunitstayid as varchar)

),
{%- endfor %}

{%- set patient_subject = 'patienthealthsystemstayid as subject_id, *' %}

events as (

    -- patient (joined to hospital), one row per unit stay
    {{ meds_eicu_event('patient/dob', '(select ' ~ patient_subject ~ ' from stay_times)',
             "hospitaladmittimestamp - to_microseconds(cast((age_in_years * 365.25 + 182.625) * 86400000000 as bigint))",
             "'MEDS_BIRTH'") }}
    union all
    {{ meds_eicu_event('patient/gender', '(select ' ~ patient_subject ~ ' from stay_times)', none,
             "'GENDER//' || coalesce(gender, 'UNK')", static=true) }}
    union all
    {{ meds_eicu_event('patient/ethnicity', '(select ' ~ patient_subject ~ ' from stay_times)', none,
             "'RACE//' || coalesce(ethnicity, 'UNK')", static=true) }}
    union all
    {{ meds_eicu_event('patient/hosp_admission', '(select ' ~ patient_subject ~ ' from stay_times)', 'hospitaladmittimestamp',
             "'HOSPITAL_ADMISSION//' || coalesce(hospitaladmitsource, 'UNK') || '//' || coalesce(region, 'UNK') || '//'
              || coalesce(teachingstatus, 'UNK') || '//' || coalesce(numbedscategory, 'UNK')", hadm_id='hospitalid') }}
    union all
    {{ meds_eicu_event('patient/hosp_discharge', '(select ' ~ patient_subject ~ ' from stay_times)', 'hospitaldischargetimestamp',
             "'HOSPITAL_DISCHARGE//' || coalesce(hospitaldischargestatus, 'UNK') || '//'
              || coalesce(hospitaldischargelocation, 'UNK')", hadm_id='hospitalid') }}
    union all
    {{ meds_eicu_event('patient/unit_admission', '(select ' ~ patient_subject ~ ' from stay_times)', 'unitadmittimestamp',
             "'ICU_ADMISSION//' || coalesce(unitadmitsource, 'UNK') || '//' || coalesce(unitstaytype, 'UNK')",
             hadm_id='hospitalid', icustay_id='patientunitstayid', ward_id='wardid') }}
    union all
    {{ meds_eicu_event('patient/unit_admission_weight', '(select ' ~ patient_subject ~ ' from stay_times)', 'unitadmittimestamp',
             "case when admissionweight is not null then 'ICU_ADMISSION_WEIGHT' end", numeric='admissionweight',
             hadm_id='hospitalid', icustay_id='patientunitstayid') }}
    union all
    {{ meds_eicu_event('patient/unit_admission_height', '(select ' ~ patient_subject ~ ' from stay_times)', 'unitadmittimestamp',
             "case when admissionheight is not null then 'ICU_ADMISSION_HEIGHT' end", numeric='admissionheight',
             hadm_id='hospitalid', icustay_id='patientunitstayid') }}
    union all
    {{ meds_eicu_event('patient/unit_discharge', '(select ' ~ patient_subject ~ ' from stay_times)', 'unitdischargetimestamp',
             "'ICU_DISCHARGE//' || coalesce(unitdischargestatus, 'UNK') || '//'
              || coalesce(unitdischargelocation, 'UNK')",
             hadm_id='hospitalid', icustay_id='patientunitstayid', ward_id='wardid') }}
    union all
    {{ meds_eicu_event('patient/unit_discharge_weight', '(select ' ~ patient_subject ~ ' from stay_times)',
             'unitdischargetimestamp', "case when dischargeweight is not null then 'ICU_DISCHARGE_WEIGHT' end",
             numeric='dischargeweight', hadm_id='hospitalid', icustay_id='patientunitstayid') }}
    union all
    {{ meds_eicu_event('patient/time_of_death', '(select ' ~ patient_subject ~ ' from stay_times)',
             "case when hospitaldischargestatus = 'Expired' then hospitaldischargetimestamp end", "'MEDS_DEATH'") }}

    -- the tables timed from the unit admission
    union all
    {{ meds_eicu_event('admissionDx/admission_diagnosis', 'admissiondx',
             'unitadmittimestamp + to_minutes(cast(admitdxenteredoffset as bigint))',
             "'ADMISSION_DIAGNOSIS//' || coalesce(admitdxpath, 'UNK')",
             admission_dx_id='admissiondxid', icustay_id='patientunitstayid') }}
    union all
    {{ meds_eicu_event('allergy/allergy', 'allergy', 'unitadmittimestamp + to_minutes(cast(allergyenteredoffset as bigint))',
             "'ALLERGY//' || coalesce(allergytype, 'UNK')", text='allergyname') }}
    union all
    {{ meds_eicu_event('carePlanGeneral/cplItem', 'careplangeneral',
             'unitadmittimestamp + to_minutes(cast(cplitemoffset as bigint))',
             "'CAREPLAN_GENERAL//' || coalesce(cplgroup, 'UNK') || '//' || coalesce(cplitemvalue, 'UNK')") }}
    union all
    {{ meds_eicu_event('carePlanEOL/cplEolDiscussion', 'careplaneol',
             'unitadmittimestamp + to_minutes(cast(cpleoldiscussionoffset as bigint))', "'CAREPLAN_EOL'") }}
    union all
    {{ meds_eicu_event('carePlanGoal/cplGoal', 'careplangoal', 'unitadmittimestamp + to_minutes(cast(cplgoaloffset as bigint))',
             "'CAREPLAN_GOAL//' || coalesce(cplgoalcategory, 'UNK') || '//' || coalesce(cplgoalvalue, 'UNK') || '//'
              || coalesce(cplgoalstatus, 'UNK')") }}
    union all
    {{ meds_eicu_event('carePlanInfectiousDisease/cplInfectDisease', 'careplaninfectiousdisease',
             'unitadmittimestamp + to_minutes(cast(cplinfectdiseaseoffset as bigint))',
             "'CAREPLAN_INFECTIOUS_DISEASE//' || coalesce(infectdiseasesite, 'UNK') || '//'
              || coalesce(infectdiseaseassessment, 'UNK') || '//' || coalesce(treatment, 'UNK') || '//'
              || coalesce(responsetotherapy, 'UNK')") }}
    union all
    {{ meds_eicu_event('diagnosis/diagnosis', 'diagnosis', 'unitadmittimestamp + to_minutes(cast(diagnosisoffset as bigint))',
             "'DIAGNOSIS//' || diagnosisstring", diagnosis_priority='diagnosispriority') }}
    union all
    {{ meds_eicu_event('infusionDrug/infusion', 'infusiondrug', 'unitadmittimestamp + to_minutes(cast(infusionoffset as bigint))',
             "'INFUSION_DRUG'", numeric=meds_f64('infusionrate'), text='drugname', drug_rate='drugrate',
             infusion_rate='infusionrate', drug_amount='drugamount', volume_of_fluid='volumeoffluid',
             medication_id='infusiondrugid') }}
    union all
    {{ meds_eicu_event('infusionDrug/patient_weight', 'infusiondrug',
             'unitadmittimestamp + to_minutes(cast(infusionoffset as bigint))',
             "case when " ~ meds_f64('patientweight') ~ " is not null then 'SUBJECT_WEIGHT_AT_INFUSION' end",
             numeric=meds_f64('patientweight')) }}
    union all
    {{ meds_eicu_event('lab/lab_specimen_drawn', 'lab', 'unitadmittimestamp + to_minutes(cast(labresultoffset as bigint))',
             "'LAB//SPECIMEN_DRAWN//' || coalesce(labname, 'UNK') || '//' || coalesce(labmeasurenamesystem, 'UNK')",
             lab_type_id='labtypeid') }}
    union all
    {{ meds_eicu_event('lab/lab_result', 'lab', 'unitadmittimestamp + to_minutes(cast(labresultrevisedoffset as bigint))',
             "'LAB//RESULT//' || coalesce(labname, 'UNK') || '//' || coalesce(labmeasurenamesystem, 'UNK')",
             numeric='try_cast(labresult as double)', text='labresulttext', lab_type_id='labtypeid') }}
    union all
    {{ meds_eicu_event('medication/drug_started', 'medication',
             'unitadmittimestamp + to_minutes(cast(drugstartoffset as bigint))',
             "'MEDICATION//STARTED//' || coalesce(drugname, 'UNK')", numeric=meds_f64('dosage'), dosage='dosage',
             medication_id='medicationid') }}
    union all
    {{ meds_eicu_event('medication/drug_stopped', 'medication',
             'unitadmittimestamp + to_minutes(cast(drugstopoffset as bigint))',
             "'MEDICATION//STOPPED//' || coalesce(drugname, 'UNK')", medication_id='medicationid') }}
    union all
    {{ meds_eicu_event('treatment/treatment', 'treatment', 'unitadmittimestamp + to_minutes(cast(treatmentoffset as bigint))',
             "'TREATMENT//ENTERED//' || coalesce(treatmentstring, 'UNK')", text='treatmentstring') }}
    {#- vitalAperiodic and vitalPeriodic: an event per value present, coded VITALS//<kind>//<name> -#}
    {%- set vitals = [
        ('vitalAperiodic', 'vitalaperiodic', 'APERIODIC', [
            ('non_invasive_systolic', 'noninvasivesystolic', 'BP//NONINVASIVE_SYSTOLIC'),
            ('non_invasive_diastolic', 'noninvasivediastolic', 'BP//NONINVASIVE_DIASTOLIC'),
            ('non_invasive_mean', 'noninvasivemean', 'BP//NONINVASIVE_MEAN'), ('paop', 'paop', 'PAOP'),
            ('cardiac_output', 'cardiacoutput', 'CARDIAC_OUTPUT'), ('cardiac_input', 'cardiacinput', 'CARDIAC_INPUT'),
            ('svr', 'svr', 'SVR'), ('svri', 'svri', 'SVRI'), ('pvr', 'pvr', 'PVR'), ('pvri', 'pvri', 'PVRI')]),
        ('vitalPeriodic', 'vitalperiodic', 'PERIODIC', [
            ('temperature', 'temperature', 'TEMPERATURE'), ('saO2', 'sao2', 'SAO2'),
            ('heartRate', 'heartrate', 'HEARTRATE'), ('respiration', 'respiration', 'RESPIRATION'),
            ('cvp', 'cvp', 'CVP'), ('etCo2', 'etco2', 'ETCO2'),
            ('systemic_systolic', 'systemicsystolic', 'BP//SYSTEMIC_SYSTOLIC'),
            ('systemic_diastolic', 'systemicdiastolic', 'BP//SYSTEMIC_DIASTOLIC'),
            ('systemic_mean', 'systemicmean', 'BP//SYSTEMIC_MEAN'),
            ('pa_systolic', 'pasystolic', 'BP//PULM_ART_SYSTOLIC'),
            ('pa_diastolic', 'padiastolic', 'BP//PULM_ART_DIASTOLIC'), ('pa_mean', 'pamean', 'BP//PULM_ART_MEAN'),
            ('st1', 'st1', 'ST1'), ('st2', 'st2', 'ST2'), ('st3', 'st3', 'ST3'), ('ICP', 'icp', 'ICP')])] %}
    {%- for block, rows, kind, columns in vitals %}
    {%- for name, column, code in columns %}
    union all
    {{ meds_eicu_event(block ~ '/' ~ name, rows, 'unitadmittimestamp + to_minutes(cast(observationoffset as bigint))',
                       "case when " ~ column ~ " is not null then 'VITALS//" ~ kind ~ "//" ~ code ~ "' end",
                       numeric=column, vital_id=rows ~ 'id') }}
    {%- endfor %}
    {%- endfor %}
),

-- MEDS-Extract's dedup_text_and_numeric: a text that parses (polars' strict grammar: '110  ' does not) as the
-- number again, in float32, is dropped
valued as (

    select
        * replace (
            case when cast({{ meds_f64('text_value') }} as float) = cast(numeric_value as float) then null
                 else text_value end as text_value
        )
    from events
    where code is not null and (time is not null or is_static)

),

distinct_events as (

    select distinct * from valued

)

select
    subject_id,
    time,
    code,
    cast(numeric_value as float) as numeric_value,
    text_value,
    cast(hadm_id as bigint) as hadm_id,
    cast(icustay_id as bigint) as icustay_id
from distinct_events
