{#- FHIR JSON text for every FHIR model (fhir__mimic_iv__*): the generic writing macros. Domain parts live with
    their models' other macros: fhir_medications.sql (Medication keys, mixes), fhir_observations.sql (reference
    ranges, categories, microbiology rows); ids and dateTimes in fhir_ids.sql.

    Why concat(): a resource is written as one flat concat() of JSON text fragments. Nested json_object() calls
    under json_merge_patch() (to drop null members) re-read every JSON argument and the whole document, about 10x
    slower for the high-volume resources. Parts that depend only on an item, a unit or a key (codes, unit members,
    references) are best written once per distinct value and joined in.

    How optional members vanish: concat() skips NULL arguments, and an optional member is written as
    ',"name":' || value, which is NULL when the value is NULL. So every macro here returns NULL when it has nothing
    to write (no code, no value, no id, no element), and the caller never tests for NULL itself.

    No empty strings, arrays or objects: FHIR forbids "", [] and {} (and null), and validation rejects them. An
    array or object made only of optional parts is NULL without any part (fhir_json_array, fhir_json_object); text
    comes from staging, which trims it and turns '' into NULL.

    Arguments are SQL expressions (Jinja strings) of SQL values, except where named *_json (JSON text expressions,
    e.g. the result of another fhir_json_* macro). Free text goes through to_json() (escaped); ids, numbers, times
    and codes made of digits may be written as they are (fhir_json_plain_string). A code system or identifier
    system is a URL, or a MIMIC-IV on FHIR name standing for http://mimic.mit.edu/fhir/mimic/CodeSystem/<name>
    (codings) or http://mimic.mit.edu/fhir/mimic/identifier/<name> (identifiers). -#}

{#- Values -#}

{#- A JSON string (escaped) of any SQL value. -#}
{% macro fhir_json_string(expr) -%}
    to_json(cast({{ expr }} as varchar))
{%- endmacro %}

{#- A JSON string of a value that needs no escaping (uuid, number, time, digits), without to_json(). -#}
{% macro fhir_json_plain_string(expr) -%}
    ('"' || {{ expr }} || '"')
{%- endmacro %}

{#- A constant JSON string, e.g. fhir_json_constant('final') -> '"final"' (no quotes or backslashes inside). -#}
{% macro fhir_json_constant(text) -%}
    '"{{ text }}"'
{%- endmacro %}

{#- A JSON number of a numeric SQL value; NULL for NaN and infinity too (not JSON). -#}
{% macro fhir_json_number(expr) -%}
    case when isfinite(cast({{ expr }} as double)) then cast({{ expr }} as varchar) end
{%- endmacro %}

{#- A FHIR dateTime (see fhir_datetime; zone: as MIMIC-IV on FHIR writes raw times) as a JSON string. -#}
{% macro fhir_json_datetime(timestamp_expr, zone=none) -%}
    {{ fhir_datetime(timestamp_expr, json=true, zone=zone) }}
{%- endmacro %}

{#- A FHIR date (a DATE value) as a JSON string. -#}
{% macro fhir_json_date(date_expr) -%}
    strftime(cast({{ date_expr }} as date), '"%Y-%m-%d"')
{%- endmacro %}

{#- Objects and arrays -#}

{#- A member that is always present: two concat() arguments, so value_json must never be NULL. -#}
{% macro fhir_json_required(name, value_json) -%}
    ',"{{ name }}":', {{ value_json }}
{%- endmacro %}

{#- A member left out when value_json is NULL. -#}
{% macro fhir_json_optional(name, value_json) -%}
    ',"{{ name }}":' || ({{ value_json }})
{%- endmacro %}

{#- A JSON object of members made by fhir_json_required / fhir_json_optional, or of member-list expressions (text
    of zero or more members, each with its leading comma, or NULL; e.g. a column written once per item). With a
    required first member the object is one concat(); otherwise it is NULL when no member is present. -#}
{% macro fhir_json_object() -%}
    {%- set first = varargs[0] -%}
    {%- set after_name = first.split("\":'", 1)[1] if first.startswith("',\"") and "\":'" in first else '' -%}
    {%- if after_name.startswith(",") -%}
    concat('{{ '{' ~ first[2:] }}{% for member in varargs[1:] %}, {{ member }}{% endfor %}, '}')
    {%- elif varargs | length == 1 and after_name.startswith(" || (") -%}
    ('{{ '{' ~ first[2:] }} || '}')
    {%- else -%}
    nullif('{' || substr(concat({{ varargs | join(', ') }}), 2) || '}', '{}')
    {%- endif -%}
{%- endmacro %}

{#- A JSON array of elements (JSON expressions), NULL ones left out; NULL when every element is NULL. -#}
{% macro fhir_json_array() -%}
    {%- if varargs | length == 1 -%}
    ('[' || {{ varargs[0] }} || ']')
    {%- else -%}
    nullif(concat('[', concat_ws(',', {{ varargs | join(', ') }}), ']'), '[]')
    {%- endif -%}
{%- endmacro %}

{#- A JSON array aggregated over rows (an aggregate expression) in sort_key order (any sortable SQL value, e.g. a
    struct_pack of several columns); NULL elements left out, NULL when none. -#}
{% macro fhir_json_array_agg(element_json, sort_key_expr) -%}
    ('[' || {{ fhir_json_ordered_join(element_json, sort_key_expr, ',') }} || ']')
{%- endmacro %}

{#- Text values aggregated over rows and joined by `separator` in sort_key order, NULL values left out, NULL when
    none (an aggregate expression). list_sort() of a list rather than an ordered aggregate (string_agg(... order by
    ...)), which is ~10x slower in DuckDB. -#}
{% macro fhir_json_ordered_join(value_expr, sort_key_expr, separator) -%}
    array_to_string(list_transform(list_sort(list(struct_pack(k := {{ sort_key_expr }}, v := {{ value_expr }}))),
                                   e -> e.v), '{{ separator }}')
{%- endmacro %}

{#- FHIR data types -#}

{#- meta.profile of a MIMIC-IV on FHIR profile, e.g. fhir_json_meta('mimic-observation-labevents'). -#}
{% macro fhir_json_meta(profile) -%}
    '{"profile":["http://mimic.mit.edu/fhir/mimic/StructureDefinition/{{ profile }}"]}'
{%- endmacro %}

{#- A Reference to a resource of the build, e.g. fhir_json_reference('Patient', 'patient_id'), with an optional
    display; NULL without an id. -#}
{% macro fhir_json_reference(resource_type, id_expr, display_expr=none) -%}
    {%- if display_expr is none -%}
    ('{"reference":"{{ resource_type }}/' || {{ id_expr }} || '"}')
    {%- else -%}
    ('{"reference":"{{ resource_type }}/' || {{ id_expr }} || '"'
     || concat(',"display":' || {{ fhir_json_string(display_expr) }}, '}'))
    {%- endif -%}
{%- endmacro %}

{#- The system member of a Coding: a constant (URL or CodeSystem name), or system_expr, a SQL expression of a URL
    that needs no escaping (e.g. a URL stem || icd_version). -#}
{% macro _fhir_json_system(system, system_expr) -%}
    {%- if system_expr is not none -%}
    '"system":"' || {{ system_expr }} || '"',
    {%- else -%}
    '"system":"{{ system if '://' in system else 'http://mimic.mit.edu/fhir/mimic/CodeSystem/' ~ system }}"',
    {%- endif -%}
{%- endmacro %}

{#- A Coding; NULL without a code. -#}
{% macro fhir_json_coding(system, code_expr, display_expr=none, system_expr=none) -%}
    case when {{ code_expr }} is not null then concat('{', {{ _fhir_json_system(system, system_expr) }}
        ',"code":', {{ fhir_json_string(code_expr) }}
        {%- if display_expr is not none %}, ',"display":' || {{ fhir_json_string(display_expr) }}{% endif %}, '}') end
{%- endmacro %}

{#- A CodeableConcept with one Coding, and text if given; NULL without a code. -#}
{% macro fhir_json_concept(system, code_expr, display_expr=none, text_expr=none, system_expr=none) -%}
    case when {{ code_expr }} is not null then concat('{"coding":[{', {{ _fhir_json_system(system, system_expr) }}
        ',"code":', {{ fhir_json_string(code_expr) }}
        {%- if display_expr is not none %}, ',"display":' || {{ fhir_json_string(display_expr) }}{% endif %}, '}]'
        {%- if text_expr is not none %}, ',"text":' || {{ fhir_json_string(text_expr) }}{% endif %}, '}') end
{%- endmacro %}

{#- An Identifier (system: a URL or an identifier name); NULL without a value. plain=true writes the value
    without escaping (fhir_json_plain_string: ids, digits). -#}
{% macro fhir_json_identifier(system, value_expr, plain=false) -%}
    {%- set url = system if '://' in system else 'http://mimic.mit.edu/fhir/mimic/identifier/' ~ system -%}
    {%- if plain -%}
    ('{"system":"{{ url }}","value":"' || {{ value_expr }} || '"}')
    {%- else -%}
    ('{"system":"{{ url }}","value":' || {{ fhir_json_string(value_expr) }} || '}')
    {%- endif -%}
{%- endmacro %}

{#- The unit members of a Quantity in MIMIC-IV's unit (code system mimic-units, as MIMIC-IV on FHIR writes it):
    ',"unit":...,"system":...,"code":...'; NULL without a unit. Worth computing once per unit (or item). -#}
{% macro fhir_json_unit_members(unit_expr) -%}
    (',"unit":' || {{ fhir_json_string(unit_expr) }}
     || ',"system":"http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-units","code":' || {{ fhir_json_string(unit_expr) }})
{%- endmacro %}

{#- A Quantity; NULL without a (finite) value. The unit either as unit_expr (a SQL value) or as unit_members (an
    expression made by fhir_json_unit_members, e.g. a column written once per unit); comparator optional. -#}
{% macro fhir_json_quantity(value_expr, unit_expr=none, comparator_expr=none, unit_members=none) -%}
    ('{"value":' || {{ fhir_json_number(value_expr) }} || concat(
        {%- if comparator_expr is not none %}',"comparator":' || {{ fhir_json_string(comparator_expr) }}, {% endif %}
        {%- if unit_expr is not none %}{{ fhir_json_unit_members(unit_expr) }}, {% endif %}
        {%- if unit_members is not none %}{{ unit_members }}, {% endif %}'}'))
{%- endmacro %}

{#- An Extension with one value (value_member: e.g. 'valueString'); NULL without a value. url: a URL, or a
    MIMIC-IV on FHIR StructureDefinition name. -#}
{% macro fhir_json_extension(url, value_member, value_json) -%}
    {%- set url = url if '://' in url else 'http://mimic.mit.edu/fhir/mimic/StructureDefinition/' ~ url -%}
    ('{"url":"{{ url }}","{{ value_member }}":' || {{ value_json }} || '}')
{%- endmacro %}

{#- A Period; NULL without start and end. start_required=true when the start is never NULL (cheaper); zone: see
    fhir_datetime. -#}
{% macro fhir_json_period(start_expr, end_expr, start_required=false, zone=none) -%}
    {%- set start_member = (fhir_json_required if start_required else fhir_json_optional)('start', fhir_json_datetime(start_expr, zone)) -%}
    {{ fhir_json_object(start_member, fhir_json_optional('end', fhir_json_datetime(end_expr, zone))) }}
{%- endmacro %}

{#- Ids -#}

{#- Ids computed once per distinct key (a lookup CTE body) rather than once per row, with the Reference to the
    resource: fhir_id_lookup('Patient', 'subject_id', ref(...)) -> (subject_id, id, reference); resource_type of
    the Reference: the namespace's unless given (EncounterICU -> 'Encounter'). -#}
{% macro fhir_id_lookup(namespace_name, key_column, relation, resource_type=none) -%}
    select {{ key_column }}, id, {{ fhir_json_reference(resource_type or namespace_name, 'id') }} as reference
    from (
        select {{ key_column }}, {{ fhir_id(namespace_name, key_column) }} as id
        from (select distinct {{ key_column }} from {{ relation }} where {{ key_column }} is not null) as keys
    ) as identified
{%- endmacro %}
