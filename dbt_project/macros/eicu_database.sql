{#-
    The two eICU databases built by the published eICU preprocessing (glee4810/EHRSQL preprocess_db_eicu.py):
    `ehrsql_eicu`, EHRSQL (2022)'s own rules (docs/benchmarks.md#ehrsql-eicu-database), and `renamed`, the rules
    EHR-ChatQA's database was found to follow (docs/benchmarks.md#ehr-chatqa-eicu-database). One set of intermediate
    models per database (int_<database>__eicu__*), each a call of a macro below; the time shift, the cohort size and
    the de-identification come from the `ehrsql_eicu` var group (presets in src/ehrbench/profiles.py).
-#}

{#- What differs between the two databases. EHR-ChatQA's database keeps every patient and is not de-identified,
    whatever the var group says; the var group's cohort and de-identification settings are EHRSQL (2022)'s. -#}
{% macro eicu_rules(database) -%}
    {%- if database == 'ehrsql_eicu' -%}
        {{ return({
            'hospital_stay_percentile': 0.95,
            'age_over_89': none,
            'cohort_sample': true,
            'deidentify': ehrsql_eicu_var('deidentify'),
        }) }}
    {%- elif database == 'renamed' -%}
        {{ return({
            'hospital_stay_percentile': none,
            'age_over_89': 90,
            'cohort_sample': false,
            'deidentify': false,
        }) }}
    {%- else -%}
        {{ exceptions.raise_compiler_error("unknown eICU database '" ~ database ~ "' (expected ehrsql_eicu or renamed)") }}
    {%- endif -%}
{%- endmacro %}

{#- An intermediate model of one eICU database. -#}
{% macro eicu_int(database, name) -%}
    {{ ref('int_' ~ database ~ '__eicu__' ~ name) }}
{%- endmacro %}

{#- One staged eICU table with `file_row`, the 1-based row of its raw CSV file (the published code works in file
    row order). The staging view reads the raw table in load order, which is the file's. -#}
{% macro eicu_file_rows(staging_model) -%}
    select *, row_number() over () as file_row
    from {{ ref(staging_model) }}
{%- endmacro %}

{#- Keeps a time only up to the current time; otherwise NULL. There is no lower bound: the published adjust_time
    only compares with the current time, so events before the start year stay. -#}
{% macro eicu_up_to_now(time_expression) -%}
    case
        when {{ time_expression }} <= {{ ehrsql_eicu_current_time() }}
            then {{ time_expression }}
    end
{%- endmacro %}

{#- An event time: the unit admit time of the stay + an offset in minutes, kept up to the current time. -#}
{% macro eicu_event_time(unitadmittime, offset) -%}
    {{ eicu_up_to_now(ehrsql_eicu_offset_time(unitadmittime, offset)) }}
{%- endmacro %}

{#-
    Unit stays with what the time shift needs: the order of the published per-patient loop, each stay's hospital
    visit rank within its discharge year, and whether the loop reached (and accepted) the stay.
    Filters, in the published order: hospitaladmitsource present; gender male/female; age "> 89" dropped (EHRSQL
    (2022)) or read as 90 (EHR-ChatQA), then age > 10; for EHRSQL (2022), hospital stays
    (hospitaldischargeoffset - hospitaladmitoffset) below their 95th percentile (linear interpolation, as
    numpy.percentile) over the stays left so far. The loop visits patients in order of first appearance in
    patient.csv, a patient's stays by discharge year, then hospital stay (first appearance), then unit stay (file
    order); it stops at the first stay whose offsets are inconsistent (not hospitaladmitoffset <= 0 <
    unitdischargeoffset <= hospitaldischargeoffset): that stay and every later one of the patient get no time.
-#}
{% macro eicu_unit_stays(database) %}
{%- set rules = eicu_rules(database) -%}
with staged as (

    {{ eicu_file_rows('stg_eicu__patient') }}

),

typed as (

    select
        file_row,
        patientunitstayid,
        patienthealthsystemstayid,
        {{ ehrsql_eicu_text('uniquepid') }} as uniquepid,
        {{ ehrsql_eicu_text('gender') }} as gender,
        case
            when trim(age) = '> 89' then {{ rules.age_over_89 if rules.age_over_89 is not none else 'null' }}
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

eligible as (

    select *
    from typed
    where hospitaladmitsource is not null
      and gender in ('male', 'female')
      and source_age > 10

),

kept as (

    select eligible.*
    from eligible
    {%- if rules.hospital_stay_percentile is not none %}
    where eligible.hospitaldischargeoffset - eligible.hospitaladmitoffset < (
        select quantile_cont(hospitaldischargeoffset - hospitaladmitoffset, {{ rules.hospital_stay_percentile }})
        from eligible
    )
    {%- endif %}

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
{% endmacro %}

{#-
    Accepted unit stays with their shifted times (one row per unit stay), before any cohort sample. unit admit time
    = sampled hospital admit date at hospitaladmittime24, minus hospitaladmitoffset minutes; every other time = unit
    admit time + its offset. Stays admitted (to hospital or unit) after the current time are dropped; later
    unit/hospital discharge times become NULL (a "current" stay), and a NULL hospital discharge time also blanks
    hospitaldischargestatus and dischargeweight.
-#}
{% macro eicu_shifted_stays(database) %}
with stays as (

    select * from {{ eicu_int(database, 'unit_stays') }}
    where accepted

),

admit_dates as (

    select uniquepid, hospitaldischargeyear, visit_seq, sampled_first_year, hospitaladmitdate
    from {{ eicu_int(database, 'admit_dates') }}

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
    {{ eicu_up_to_now('shifted_unitdischargetime') }} as unitdischargetime,
    {{ eicu_up_to_now('shifted_hospitaldischargetime') }} as hospitaldischargetime,
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
{% endmacro %}

{#- The stays of the database: the shifted stays of the sampled patients (int_<database>__eicu__cohort) for
    EHRSQL (2022), every shifted stay for EHR-ChatQA. -#}
{% macro eicu_patient(database) %}
{%- if eicu_rules(database).cohort_sample %}
select stays.*
from {{ eicu_int(database, 'stays') }} as stays
where stays.uniquepid in (select uniquepid from {{ eicu_int(database, 'cohort') }})
{%- else %}
{{ eicu_shifted_stays(database) }}
{%- endif %}
{% endmacro %}

{#-
    The event tables: raw id, the offsets that become times (time column -> offset column; `required` is the time a
    row needs to be kept, the others become NULL after the current time), and the columns the de-identification
    shuffles (condition_value_shuffler's target_cols).
-#}
{% macro eicu_event_tables() -%}
    {{ return({
        'diagnosis': {'id': 'diagnosisid', 'times': {'diagnosistime': 'diagnosisoffset'}, 'required': 'diagnosistime',
                      'shuffled': ['diagnosisname', 'icd9code']},
        'treatment': {'id': 'treatmentid', 'times': {'treatmenttime': 'treatmentoffset'}, 'required': 'treatmenttime',
                      'shuffled': ['treatmentname']},
        'lab': {'id': 'labid', 'times': {'labresulttime': 'labresultoffset'}, 'required': 'labresulttime',
                'shuffled': ['labname', 'labresult']},
        'medication': {'id': 'medicationid', 'times': {'drugstarttime': 'drugstartoffset', 'drugstoptime': 'drugstopoffset'},
                       'required': 'drugstarttime', 'shuffled': ['drugname', 'dosage', 'routeadmin']},
        'allergy': {'id': 'allergyid', 'times': {'allergytime': 'allergyoffset'}, 'required': 'allergytime',
                    'shuffled': ['allergyname', 'drugname']},
        'intakeoutput': {'id': 'intakeoutputid', 'times': {'intakeoutputtime': 'intakeoutputoffset'},
                         'required': 'intakeoutputtime', 'shuffled': ['celllabel', 'cellpath', 'cellvaluenumeric']},
        'microlab': {'id': 'microlabid', 'times': {'culturetakentime': 'culturetakenoffset'}, 'required': 'culturetakentime',
                     'shuffled': ['culturesite', 'organism']},
        'vitalperiodic': {'id': 'vitalperiodicid', 'times': {'observationtime': 'observationoffset'},
                          'required': 'observationtime', 'shuffled': []},
    }) }}
{%- endmacro %}

{#-
    The rows of an event table that the published code keeps before the cohort filter: its own filters and names,
    file_row, the raw id (source_<id>), the unit stay, the offsets and the values. For a de-identified database the
    rows are also numbered by `position` (0-based) in the order of the published shuffler's table: the rows merged
    with patient.csv, which (pandas before 2.2) groups them by unit stay in order of first appearance, file order
    within a stay; the shuffled table keeps that order, so its renumbered ids do too. Otherwise position follows the
    file.
-#}
{% macro eicu_event_rows(database, table) %}
{%- set spec = eicu_event_tables()[table] -%}
{%- set shuffled = eicu_rules(database).deidentify and spec.shuffled -%}
with selected as (
    {{ eicu_event_row_selection(table) }}
)
{%- if shuffled %},
merged as (
    select *, min(file_row) over (partition by patientunitstayid) as stay_first_row
    from selected
    where patientunitstayid in (select patientunitstayid from {{ ref('stg_eicu__patient') }})
)
select
    merged.* exclude (stay_first_row),
    cast(row_number() over (order by stay_first_row, file_row) - 1 as bigint) as position
from merged
{%- else %}
select selected.*, cast(file_row - 1 as bigint) as position
from selected
{%- endif %}
{% endmacro %}

{#- Diagnosis and treatment rows: the path rule over the whole table (ties of the most common levels 1-2 go to the
    one seen first in the file), the levels 3-4 name as `name_column`. -#}
{% macro eicu_named_path_rows(staging_model, id_column, offset_column, path_column, name_column, text_columns=[]) %}
    with source as (
        select
            file_row,
            {{ id_column }} as source_{{ id_column }},
            patientunitstayid,
            {{ offset_column }},
            {{ ehrsql_eicu_text(path_column) }} as {{ path_column }}
            {%- for column in text_columns %},
            {{ ehrsql_eicu_text(column) }} as {{ column }}
            {%- endfor %}
        from ({{ eicu_file_rows(staging_model) }}) as staged
        where {{ path_column }} is not null
    ),
    named as (
        {{ ehrsql_eicu_named_paths('source', 'file_row', path_column) }}
    )
    select * exclude (name), name as {{ name_column }} from named
{% endmacro %}

{#- Rows of a table kept whole: its id, unit stay and offset, and its text columns lower-cased and stripped. -#}
{% macro eicu_text_rows(staging_model, id_column, offset_column, text_columns) %}
    select
        file_row,
        {{ id_column }} as source_{{ id_column }},
        patientunitstayid,
        {%- for column in text_columns %}
        {{ ehrsql_eicu_text(column) }} as {{ column }},
        {%- endfor %}
        {{ offset_column }}
    from ({{ eicu_file_rows(staging_model) }}) as staged
{% endmacro %}

{#- Each event table's own row selection (before the cohort and time filters), as published. -#}
{% macro eicu_event_row_selection(table) %}
{%- if table == 'diagnosis' -%}
    {{ eicu_named_path_rows('stg_eicu__diagnosis', 'diagnosisid', 'diagnosisoffset', 'diagnosisstring',
                             'diagnosisname', ['icd9code']) }}
{%- elif table == 'treatment' -%}
    {{ eicu_named_path_rows('stg_eicu__treatment', 'treatmentid', 'treatmentoffset', 'treatmentstring',
                             'treatmentname') }}
{%- elif table == 'lab' -%}
    select
        file_row,
        labid as source_labid,
        patientunitstayid,
        {{ ehrsql_eicu_text('labname') }} as labname,
        labresult,
        labresultoffset
    from ({{ eicu_file_rows('stg_eicu__lab') }}) as lab
    where labresult is not null
{%- elif table == 'medication' -%}
    select
        file_row,
        medicationid as source_medicationid,
        patientunitstayid,
        {{ ehrsql_eicu_text('drugname') }} as drugname,
        {{ ehrsql_eicu_text('dosage') }} as dosage,
        {{ ehrsql_eicu_text('routeadmin') }} as routeadmin,
        drugstartoffset,
        drugstopoffset
    from ({{ eicu_file_rows('stg_eicu__medication') }}) as medication
    where drugname is not null
      and dosage is not null
      and routeadmin is not null
      and {{ ehrsql_eicu_text('drugordercancelled') }} = 'no'
{%- elif table == 'allergy' -%}
    {{ eicu_text_rows('stg_eicu__allergy', 'allergyid', 'allergyoffset', ['drugname', 'allergyname']) }}
{%- elif table == 'intakeoutput' -%}
    {#- keep labels that occur with an 'intake (ml)' or 'output (ml)' cellpath, drop 'intake' and 'output', then
        strip a trailing word 'intake', then a trailing word 'output' -#}
    with source as (
        select
            file_row,
            intakeoutputid as source_intakeoutputid,
            patientunitstayid,
            intakeoutputoffset,
            {{ ehrsql_eicu_text('cellpath') }} as cellpath,
            {{ ehrsql_eicu_text('celllabel') }} as source_celllabel,
            cellvaluenumeric
        from ({{ eicu_file_rows('stg_eicu__intakeoutput') }}) as intakeoutput
    ),
    volume_labels as (
        select distinct source_celllabel
        from source
        where contains(cellpath, 'intake (ml)') or contains(cellpath, 'output (ml)')
    )
    select
        *,
        {{ ehrsql_eicu_drop_last_word(ehrsql_eicu_drop_last_word('source_celllabel', 'intake'), 'output') }} as celllabel
    from source
    where source_celllabel in (select source_celllabel from volume_labels)
      and source_celllabel not in ('intake', 'output')
{%- elif table == 'microlab' -%}
    {{ eicu_text_rows('stg_eicu__microlab', 'microlabid', 'culturetakenoffset', ['culturesite', 'organism']) }}
{%- elif table == 'vitalperiodic' -%}
    select
        file_row,
        vitalperiodicid as source_vitalperiodicid,
        patientunitstayid,
        cast(temperature as double) as temperature,
        cast(sao2 as integer) as sao2,
        cast(heartrate as integer) as heartrate,
        cast(respiration as integer) as respiration,
        cast(systemicsystolic as integer) as systemicsystolic,
        cast(systemicdiastolic as integer) as systemicdiastolic,
        cast(systemicmean as integer) as systemicmean,
        observationoffset
    from ({{ eicu_file_rows('stg_eicu__vitalperiodic') }}) as vital
{%- else -%}
    {{ exceptions.raise_compiler_error("unknown eICU event table '" ~ table ~ "'") }}
{%- endif -%}
{% endmacro %}

{#-
    An event table of the database: its rows (de-identified: row i takes the shuffled columns of row
    int_<database>__eicu__deidentify_order[i]), kept for the database's stays, with times up to the current time;
    rows without their required time are dropped; ids renumbered 0..n-1 in `position` order. source_<id> and
    file_row keep each row's own source (not the source of its shuffled values).
-#}
{% macro eicu_events(database, table) %}
{%- set spec = eicu_event_tables()[table] -%}
{%- set shuffled = eicu_rules(database).deidentify and spec.shuffled -%}
with event_rows as (

    {%- if shuffled %}
    select * from {{ eicu_int(database, table ~ '_rows') }}
    {%- else %}
    {{ eicu_event_rows(database, table) | indent(4) }}
    {%- endif %}

),

{%- if shuffled %}

deidentified as (

    select
        event_rows.* exclude ({{ spec.shuffled | join(', ') }}),
        {%- for column in spec.shuffled %}
        shuffled_from.{{ column }}{{ "," if not loop.last }}
        {%- endfor %}
    from event_rows
    inner join {{ eicu_int(database, 'deidentify_order') }} as shuffle
        on shuffle.table_name = '{{ table }}'
       and shuffle.position = event_rows.position
    inner join event_rows as shuffled_from
        on shuffled_from.position = shuffle.source_position

),
{%- endif %}

timed as (

    select
        events.*,
        {%- for time_column, offset_column in spec.times.items() %}
        {{ eicu_event_time('stays.unitadmittime', 'events.' ~ offset_column) }} as {{ time_column }}{{ "," if not loop.last }}
        {%- endfor %}
    from {{ 'deidentified' if shuffled else 'event_rows' }} as events
    inner join {{ eicu_int(database, 'patient') }} as stays using (patientunitstayid)

)

select
    cast(row_number() over (order by position) - 1 as {{ 'bigint' if table == 'vitalperiodic' else 'integer' }}) as {{ spec.id }},
    *
from timed
where {{ spec.required }} is not null
{% endmacro %}

{#- The hospital table (EHR-ChatQA's database adds it, from hospital.csv): every staged hospital, text lower-cased;
    teachingstatus written back as the source's 't'/'f'. -#}
{% macro eicu_hospital() %}
select
    file_row,
    hospitalid,
    {{ ehrsql_eicu_text('numbedscategory') }} as numbedscategory,
    case when teachingstatus then 't' when not teachingstatus then 'f' end as teachingstatus,
    {{ ehrsql_eicu_text('region') }} as region
from ({{ eicu_file_rows('stg_eicu__hospital') }}) as hospital
{% endmacro %}

{#-
    Cost: one row per diagnosis, lab, treatment and medication event (blocks in that order, costid 0..n-1
    continuing across the blocks, each block in its renumbered id order); chargetime = the event time (medication:
    drugstarttime); cost per event name from int_<database>__eicu__cost_amounts. patientunitstayid is kept
    (EHR-ChatQA's cost has it; EHRSQL (2022)'s cost drops it in its mart).
-#}
{% macro eicu_cost(database) %}
with events as (

    select 1 as block, 'diagnosis' as eventtype, diagnosisid as eventid, patientunitstayid,
           diagnosisname as cost_key, diagnosistime as chargetime
    from {{ eicu_int(database, 'diagnosis') }}
    union all
    select 2, 'lab', labid, patientunitstayid, labname, labresulttime
    from {{ eicu_int(database, 'lab') }}
    union all
    select 3, 'treatment', treatmentid, patientunitstayid, treatmentname, treatmenttime
    from {{ eicu_int(database, 'treatment') }}
    union all
    select 4, 'medication', medicationid, patientunitstayid, drugname, drugstarttime
    from {{ eicu_int(database, 'medication') }}

)

select
    cast(row_number() over (order by events.block, events.eventid) - 1 as integer) as costid,
    stays.uniquepid,
    stays.patienthealthsystemstayid,
    events.patientunitstayid,
    events.eventtype,
    events.eventid,
    events.chargetime,
    amounts.cost,
    events.cost_key
from events
inner join {{ eicu_int(database, 'patient') }} as stays using (patientunitstayid)
inner join {{ eicu_int(database, 'cost_amounts') }} as amounts
    on amounts.eventtype = events.eventtype
   and amounts.cost_key = events.cost_key
{% endmacro %}
