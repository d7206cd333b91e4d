{#- The MIMIC-IV profiles built on the EHRSQL-2024 preprocessing (int_ehrsql2024__mimic_iv__<table>):
    `ehrsql2024` (DESIGN §5.1) and `renamed` (EHR-ChatQA, §5.2), which differ in the label-owner filter. -#}

{#- The source row's MIMIC-IV key as a JSON object, e.g. {"labevent_id": 222161}: the lineage that maps a
    benchmark row back to the raw data (FHIR ids are made from these keys). Arguments: key name = SQL expr. -#}
{% macro mimic_iv_source_key() -%}
    to_json(struct_pack({% for name, expr in kwargs.items() %}{{ name }} := {{ expr }}{{ ", " if not loop.last }}{% endfor %}))
{%- endmacro %}

{#- The rows of one table of a profile, numbered: row_id = 0..n-1 in source file order. `ehrsql2024` drops the
    labels that the label-owner list gives to another table and every event of a dropped item (DESIGN §5.1
    step 5); `renamed` keeps them (§5.2). The agent-facing model and the profile's lineage both read this, so
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
