{#- The MIMIC-IV profiles built on the EHRSQL-2024 preprocessing (int_ehrsql2024__mimic_iv__<table>):
    `ehrsql2024` (docs/benchmarks.md#ehrsql-2024-database) and `renamed` (EHR-ChatQA, docs/benchmarks.md#ehr-chatqa-renamed-schemas), which differ in the label-owner filter. -#}

{#- The source row's MIMIC-IV key as a JSON object, e.g. {"labevent_id": 222161}: the lineage that maps a
    benchmark row back to the raw data (FHIR ids are made from these keys). Arguments: key name = SQL expr. -#}
{% macro mimic_iv_source_key() -%}
    to_json(struct_pack({% for name, expr in kwargs.items() %}{{ name }} := {{ expr }}{{ ", " if not loop.last }}{% endfor %}))
{%- endmacro %}

{#- The rows of one table of a profile, numbered: row_id = 0..n-1 in source file order. `ehrsql2024` drops the
    labels that the label-owner list gives to another table and every event of a dropped item (docs/benchmarks.md#ehrsql-2024-build-algorithm,
    step 5); `renamed` keeps them (docs/benchmarks.md#ehr-chatqa-renamed-schemas). The agent-facing model and the profile's lineage both read this, so
    the two always agree on row_id. -#}
{% macro mimic_iv_profile_rows(profile, table_name) %}
    {%- set owner_filtered = {
        'd_labitems': ('label', 'labevents'),
        'd_items': ('label', 'inputevents'),
        'prescriptions': ('drug', 'prescriptions'),
    } -%}
    {%- set item_filtered = {
        'labevents': 'd_labitems',
        'inputevents': 'd_items',
        'outputevents': 'd_items',
    } -%}
    {%- if profile not in ('ehrsql2024', 'renamed') -%}
        {{ exceptions.raise_compiler_error("mimic_iv_profile_rows: unknown profile '" ~ profile ~ "'") }}
    {%- endif %}
    select row_number() over (order by t.file_row) - 1 as row_id, t.*
    from {{ ref('int_ehrsql2024__mimic_iv__' ~ table_name) }} as t
    {%- if profile == 'ehrsql2024' and table_name in owner_filtered %}
    {%- set column, owner = owner_filtered[table_name] %}
    left join {{ ref('int_ehrsql2024__mimic_iv__label_owner') }} as o on o.label = t.{{ column }}
    where o.owner_table is null or o.owner_table = '{{ owner }}'
    {%- elif profile == 'ehrsql2024' and table_name in item_filtered %}
    where t.itemid in (select itemid from {{ ref('ehrsql2024__mimic_iv__' ~ item_filtered[table_name]) }})
    {%- endif %}
{% endmacro %}

{#- The synthetic cost table of a profile (docs/benchmarks.md#ehrsql-2024-build-algorithm (step 7)): one row per diagnosis, lab, procedure and
    prescription event of the profile (blocks in that order, row_id continuing across blocks); event_type =
    the source table name (the renamed profile maps it to its own table names); event_id = the event's row_id;
    chargetime = the event time (prescriptions: starttime); cost per key from the profile's draws. -#}
{% macro mimic_iv_cost_rows(profile) %}
with events as (

    select 1 as block, row_id as event_id, subject_id, hadm_id, 'diagnoses_icd' as event_type,
           charttime as chargetime, {{ ehrsql2024_icd_key('icd_version', 'icd_code') }} as cost_key
    from ({{ mimic_iv_profile_rows(profile, 'diagnoses_icd') }}) as diagnoses
    union all
    select 2, row_id, subject_id, hadm_id, 'labevents', charttime, cast(itemid as varchar)
    from ({{ mimic_iv_profile_rows(profile, 'labevents') }}) as labs
    union all
    select 3, row_id, subject_id, hadm_id, 'procedures_icd', charttime, {{ ehrsql2024_icd_key('icd_version', 'icd_code') }}
    from ({{ mimic_iv_profile_rows(profile, 'procedures_icd') }}) as procedures
    union all
    select 4, row_id, subject_id, hadm_id, 'prescriptions', starttime, drug
    from ({{ mimic_iv_profile_rows(profile, 'prescriptions') }}) as prescriptions

)

select
    row_number() over (order by e.block, e.event_id) - 1 as row_id,
    e.subject_id,
    e.hadm_id,
    e.event_type,
    e.event_id,
    e.chargetime,
    d.cost
from events as e
inner join {{ ref('int_' ~ profile ~ '__mimic_iv__cost_draws') }} as d
    on d.event_type = e.event_type and d.cost_key = e.cost_key
{% endmacro %}

{#- The new name of a table named in a value (cost event types, d_items.linksto) under the published
    EHR-ChatQA renames (seed ehrchatqa_rename_map). -#}
{% macro renamed_table_name(database, table_name_expr) -%}
    (select distinct m.target_table from {{ ref('ehrchatqa_rename_map') }} as m
     where m.db = '{{ database }}' and m.source_table = {{ table_name_expr }})
{%- endmacro %}

{#- Lineage of a MIMIC-IV profile (hidden from agents): one row per benchmark row, table_name = the profile's
    table, row_id, source_table = the MIMIC-IV table, source_row = 1-based row of the raw file, source_key = its
    MIMIC-IV key (JSON). Cost rows are synthetic and have no lineage of their own (event_type/event_id lead to
    the event's row). -#}
{% macro mimic_iv_lineage(profile) %}
    {%- set tables = ['patients', 'admissions', 'd_icd_diagnoses', 'd_icd_procedures', 'd_labitems', 'd_items',
                      'diagnoses_icd', 'procedures_icd', 'labevents', 'prescriptions', 'chartevents', 'inputevents',
                      'outputevents', 'microbiologyevents', 'icustays', 'transfers'] -%}
    {%- for table_name in tables %}
select
    {% if profile == 'renamed' -%}
    {{ renamed_table_name('mimic_iv', "'" ~ table_name ~ "'") }}
    {%- else -%}
    '{{ table_name }}'
    {%- endif %} as table_name,
    row_id,
    '{{ table_name }}' as source_table,
    file_row as source_row,
    source_key
from ({{ mimic_iv_profile_rows(profile, table_name) }}) as {{ table_name }}
{{ "union all" if not loop.last }}
    {%- endfor %}
{% endmacro %}
