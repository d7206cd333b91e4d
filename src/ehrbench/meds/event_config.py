"""MEDS event configurations: which events each raw table's rows become, in the language of MEDS-Extract 0.7's
`event_configs.yaml` (the one Medical-Event-Data-Standard/MIMIC_IV_MEDS writes), compiled to one DuckDB query.

The subset read here is what MIMIC_IV_MEDS's configuration uses:

    <table>:                                   e.g. hosp/admissions (its file: <data>/hosp/admissions.csv.gz)
      _table:
        join: {<other table>: {key: hadm_id, cols: [dischtime]}}       columns of another table, joined on a key;
                                                                       `aggregate: min` (an ehrbench extension, for
                                                                       the ETL's pre-MEDS death-time join) takes a
                                                                       key's smallest value when the key repeats
        cols: {year_of_birth: "($anchor_year - $anchor_age)::str"}     a column computed from two others (- or +)
      <event name>:
        code: HOSPITAL_DISCHARGE | "LITERAL" | $column | f"PREFIX//{$a}//{$b ?? 'UNK'}"
        time: null (a static event) | $col::"%Y-%m-%d %H:%M:%S" | $col::?"%Y-%m-%d" (null if it does not parse)
              | $col::year (1 January of that year) | coalesce(<time>, <time>, ...)
        numeric_value: $col      text_value: $col      hadm_id: $col      icustay_id: $col

As in MEDS-Extract 0.7, a null `{$col}` makes the code null (`{$col ?? 'UNK'}` does not), and an event whose code is
null, or whose time is null when the configuration gives one, is dropped. Other keys of an event (e.g. `insurance`,
`_metadata`) are MEDS-Extract's extra columns and code metadata: read and ignored. Every value is read as text, as
the raw CSV files hold it, so the same query runs over the files and over typed tables.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ehrbench.errors import ValidationError

EVENT_COLUMNS = ("subject_id", "time", "code", "numeric_value", "text_value", "hadm_id", "icustay_id")
VALUE_FIELDS = ("numeric_value", "text_value", "hadm_id", "icustay_id")
SUBJECT_ID = "subject_id"

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_COLUMN = re.compile(rf"^\$({_NAME})$")
_TEMPLATE = re.compile(r"^f(['\"])(.*)\1$", re.S)
_PLACEHOLDER = re.compile(rf"\{{\s*\$({_NAME})\s*(?:\?\?\s*(['\"])(.*?)\2\s*)?\}}")
_TIME = re.compile(rf"^\$({_NAME})\s*::\s*(?:(\?)?\s*\"([^\"]*)\"|(year))$")
_COALESCE = re.compile(r"^coalesce\((.*)\)$", re.S)
_DERIVED = re.compile(rf"^\(?\s*\$({_NAME})\s*([-+])\s*\$({_NAME})\s*\)?\s*(?:::\s*str)?$")
_TABLE = re.compile(r"^[a-z_][a-z0-9_]*(/[a-z_][a-z0-9_]*)?$")


@dataclass(frozen=True)
class Join:
    table: str
    key: str
    columns: tuple[str, ...]
    aggregate: str | None = None  # min: the key's smallest value of each column


@dataclass(frozen=True)
class Event:
    name: str
    code: str  # the field as written
    time: str | None
    values: dict[str, str] = field(default_factory=dict)  # numeric_value, text_value, hadm_id, icustay_id → `$col`


@dataclass(frozen=True)
class TableConfig:
    table: str
    events: tuple[Event, ...]
    joins: tuple[Join, ...] = ()
    derived: dict[str, str] = field(default_factory=dict)  # column → expression


@dataclass(frozen=True)
class EventConfig:
    tables: tuple[TableConfig, ...]

    @property
    def table_names(self) -> list[str]:
        """Every table the configuration reads (its own and those it joins)."""
        names = [t.table for t in self.tables]
        return names + sorted({j.table for t in self.tables for j in t.joins} - set(names))

    def event_names(self) -> list[tuple[str, str]]:
        return [(t.table, e.name) for t in self.tables for e in t.events]


def load_event_config(path: Path) -> EventConfig:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ValidationError(f"{path}: not YAML ({exc})") from None
    return parse_event_config(document, str(path))


def parse_event_config(document: object, source: str = "event configuration") -> EventConfig:
    """The configuration a YAML document describes; anything outside the subset above is a ValidationError naming
    the table, the event and the field."""
    if not isinstance(document, Mapping) or not document:
        raise ValidationError(f"{source}: expected a mapping of table name to its events")
    tables = []
    for table, body in document.items():
        where = f"{source}: {table}"
        if table in ("subject_id_col", "_defaults"):
            if table == "subject_id_col" and body != SUBJECT_ID:
                raise ValidationError(f"{where}: only subject_id is supported as the subject column")
            continue
        if not isinstance(table, str) or not _TABLE.match(table):
            raise ValidationError(f"{where}: a table name is e.g. hosp/admissions")
        if not isinstance(body, Mapping):
            raise ValidationError(f"{where}: expected a mapping of event name to event")
        joins, derived = _table_options(body.get("_table") or {}, where)
        events = tuple(_event(name, spec, f"{where}.{name}") for name, spec in body.items() if name != "_table")
        if not events:
            raise ValidationError(f"{where}: no events")
        tables.append(TableConfig(table, events, joins, derived))
    return EventConfig(tuple(tables))


def _table_options(options: object, where: str) -> tuple[tuple[Join, ...], dict[str, str]]:
    if not isinstance(options, Mapping) or set(options) - {"join", "cols"}:
        raise ValidationError(f"{where}._table: expected `join` and/or `cols`")
    joins = []
    for other, join in (options.get("join") or {}).items():
        if not _TABLE.match(str(other)) or not isinstance(join, Mapping) or not isinstance(join.get("cols"), list):
            raise ValidationError(f"{where}._table.join.{other}: expected {{key: <column>, cols: [<column>, ...]}}")
        if join.get("aggregate") not in (None, "min"):
            raise ValidationError(f"{where}._table.join.{other}.aggregate: only `min` is supported")
        joins.append(Join(str(other), _name(join.get("key"), f"{where}._table.join.{other}.key"),
                          tuple(_name(c, f"{where}._table.join.{other}.cols") for c in join["cols"]),
                          join.get("aggregate")))
    derived = {}
    for column, expression in (options.get("cols") or {}).items():
        if not _DERIVED.match(str(expression)):
            raise ValidationError(f"{where}._table.cols.{column}: expected ($a - $b) or ($a + $b), got {expression!r}")
        derived[_name(column, f"{where}._table.cols")] = str(expression)
    return tuple(joins), derived


def _event(name: object, spec: object, where: str) -> Event:
    if not isinstance(spec, Mapping) or "code" not in spec or "time" not in spec:
        raise ValidationError(f"{where}: an event needs `code` and `time` (null for a static event)")
    code = str(spec["code"]).strip()
    compile_code(code, where)  # fails here, naming the event, rather than when compiled
    time = None if spec["time"] is None else str(spec["time"]).strip()
    if time is not None:
        compile_time(time, where)
    values = {}
    for key in VALUE_FIELDS:
        if spec.get(key) is not None:
            values[key] = str(spec[key]).strip()
            _column(values[key], f"{where}.{key}")
    return Event(str(name), code, time, values)


def _name(value: object, where: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(_NAME, value):
        raise ValidationError(f"{where}: expected a column name, got {value!r}")
    return value


def _column(expression: str, where: str) -> str:
    match = _COLUMN.match(expression)
    if not match:
        raise ValidationError(f"{where}: expected $<column>, got {expression!r}")
    return match.group(1)


def _text(column: str) -> str:
    return f'cast("{column}" as varchar)'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def compile_code(expression: str, where: str = "code") -> str:
    """The SQL of a code: a literal, a column, or an f-string whose `{$col}` parts are null-propagating."""
    if expression.startswith("$"):
        return _text(_column(expression, f"{where}.code"))
    template = _TEMPLATE.match(expression)
    if not template:
        literal = expression[1:-1] if len(expression) > 1 and expression[0] == expression[-1] == '"' else expression
        if "{" in literal or "$" in literal:
            raise ValidationError(f"{where}.code: a code with columns is an f-string, e.g. f\"LAB//{{$itemid}}\"")
        return _literal(literal)
    body, parts, position = template.group(2), [], 0
    for match in _PLACEHOLDER.finditer(body):
        if match.start() > position:
            parts.append(_literal(body[position:match.start()]))
        column = _text(match.group(1))
        parts.append(f"coalesce({column}, {_literal(match.group(3))})" if match.group(2) else column)
        position = match.end()
    if position < len(body):
        parts.append(_literal(body[position:]))
    rest = _PLACEHOLDER.sub("", body)
    if "{" in rest or "}" in rest:
        raise ValidationError(f"{where}.code: a placeholder is {{$column}} or {{$column ?? 'DEFAULT'}}")
    return " || ".join(parts) if parts else "''"


def compile_time(expression: str, where: str = "time") -> str:
    coalesced = _COALESCE.match(expression)
    if coalesced:
        items = [item.strip() for item in _split_arguments(coalesced.group(1))]
        return f"coalesce({', '.join(compile_time(item, where) for item in items)})"
    if _COLUMN.match(expression):
        return f"cast({_text(_column(expression, where))} as timestamp)"
    match = _TIME.match(expression)
    if not match:
        raise ValidationError(f"{where}.time: expected null, $col::\"<strptime format>\", $col::?\"<format>\", "
                              f"$col::year or coalesce(...), got {expression!r}")
    column, lenient, fmt, year = match.groups()
    if year:
        return f"make_timestamp(cast({_text(column)} as bigint), 1, 1, 0, 0, 0)"
    return f"{'try_strptime' if lenient else 'strptime'}({_text(column)}, {_literal(fmt)})"


def _split_arguments(text: str) -> list[str]:
    """Comma-separated arguments, ignoring commas inside quotes and parentheses."""
    items, depth, quote, start = [], 0, None, 0
    for index, char in enumerate(text):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:index])
            start = index + 1
    return [*items, text[start:]]


def compile_events(config: EventConfig, relation: Callable[[str], str]) -> str:
    """One query of every event of `config` (columns EVENT_COLUMNS, unordered); `relation(table)` is the SQL of a
    table's rows (e.g. a read_csv over its file)."""
    selects = []
    for table in config.tables:
        rows = _table_rows(table, relation)
        for event in table.events:
            where = f"{table.table}.{event.name}"
            value = {key: _text(_column(expr, where)) for key, expr in event.values.items()}
            selects.append(
                f"select cast({_text(SUBJECT_ID)} as bigint) as subject_id, "
                f"{compile_time(event.time, where) if event.time else 'null::timestamp'} as time, "
                f"{compile_code(event.code, where)} as code, "
                f"cast(try_cast({value.get('numeric_value', 'null')} as double) as float) as numeric_value, "
                f"{value.get('text_value', 'null::varchar')} as text_value, "
                f"cast({value.get('hadm_id', 'null')} as bigint) as hadm_id, "
                f"cast({value.get('icustay_id', 'null')} as bigint) as icustay_id, "
                f"{'false' if event.time else 'true'} as _static from ({rows}) as rows")
    union = "\nunion all\n".join(selects)
    return (f"select {', '.join(EVENT_COLUMNS)} from (\n{union}\n) as events "
            "where code is not null and (time is not null or _static)")


def _table_rows(table: TableConfig, relation: Callable[[str], str]) -> str:
    """A table's rows with its joined and derived columns."""
    joined, columns = f"({relation(table.table)}) as base", ["base.*"]
    for index, join in enumerate(table.joins):
        alias, picked = f"j{index}", ", ".join(
            f'{join.aggregate}("{c}") as "{c}"' if join.aggregate else f'"{c}"' for c in join.columns)
        grouped = " group by 1" if join.aggregate else ""
        joined += (f' left join (select "{join.key}" as _key, {picked} from ({relation(join.table)}) as other'
                   f'{grouped}) as {alias} on cast(base."{join.key}" as varchar) = cast({alias}._key as varchar)')
        columns += [f'{alias}."{c}"' for c in join.columns]
    rows = f"select {', '.join(columns)} from {joined}"
    if not table.derived:
        return rows
    derived = []
    for column, expression in table.derived.items():
        left, operator, right = _DERIVED.match(expression).groups()
        derived.append(f'cast(cast("{left}" as bigint) {operator} cast("{right}" as bigint) as varchar) as "{column}"')
    return f"select *, {', '.join(derived)} from ({rows}) as joined"
