"""FHIR R4 search over a build's `fhir/resources.duckdb`: parsing of the search parameters, an in-memory index built
once from the resources' JSON, and the SQL that answers a search from it.

Dates. MIMIC-IV on FHIR (and this project) writes shifted local wall-clock times with a fixed -04:00 offset, so the
index keeps every date as a naive wall-clock timestamp at LOCAL_OFFSET: values with that offset are taken as
written, values with another offset (or Z) are converted to it, values without one are local (FHIR: "the server's
local time"). Search values get the same treatment, so `date=ge2180-07-23` means the wall-clock day as it reads in
the resources and in the SQL databases, and `...T14:00:00Z` means the same instant as `...T10:00:00-04:00`.
Every date is a half-open range [lo, hi) given by its precision (a day, a second, ...); a Period spans from its
start's lo to its end's hi, open on a missing side. Prefixes follow FHIR R4 (search.html#prefix):
eq/ne: the search range (does not) fully contain(s) the resource's; gt/lt: the resource's range reaches after/before
the search range; ge/le: gt/lt or eq. Resources without a date never match a `date` parameter.

Bounds (issue 17): every number is range-checked, a search holds at most MAX_PARAMETERS parameters, MAX_REPEATS
repeats and MAX_VALUES values of one parameter (so the SQL stays small), and the index stops any statement after
its timeout (SearchTimeout): a search is answered or refused within seconds, never left running.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

import duckdb

LOCAL_OFFSET = timedelta(hours=-4)
DEFAULT_COUNT = 50
MAX_COUNT = 1000
# _count and _offset: above any build's resource count (the full MIMIC-IV has a few hundred million), far inside
# DuckDB's BIGINT, whose overflow was a 500.
MAX_INTEGER = 1_000_000_000
# Per search. A question needs a few codes, patients or ids and two dates (a range); a cohort search may list a
# few hundred codes. Beyond these the SQL itself gets slow to plan (8,000 dates took 77 s, 20,000 codes > 60 s).
MAX_PARAMETERS = 100  # (name, value) pairs
MAX_REPEATS = 10  # ANDed repeats of one parameter; dates cannot be ORed, so this is also the dates per search
MAX_VALUES = 500  # values of one parameter, comma-separated and repeated together
MAX_VALUE_CHARS = 100_000  # one value (500 codes with their system URLs take about 40,000)
# Any one statement of a search (count and page, the page's resources, a read). An indexed search of the full
# MIMIC-IV takes a few seconds at most; clients time out after a minute or so.
DEFAULT_TIMEOUT_S = 30.0
FORMATS = ("json", "application/json", "application/fhir+json")

# The element(s) holding a type's date for `date=`: the alternatives of a choice element in order, each a dateTime
# path or a Period (a name ending in "eriod"). Condition has no date of its own in our builds; it falls back to the
# period of its encounter, which is what "diagnosed during a stay" questions need.
DATE_ELEMENTS: dict[str, tuple[str, ...]] = {
    "Encounter": ("period",),
    "Observation": ("effectiveDateTime", "effectivePeriod", "effectiveInstant"),
    "Procedure": ("performedDateTime", "performedPeriod"),
    "Condition": ("onsetDateTime", "onsetPeriod", "recordedDate"),
    "MedicationRequest": ("authoredOn",),
    "MedicationAdministration": ("effectiveDateTime", "effectivePeriod"),
    "Specimen": ("collection.collectedDateTime", "collection.collectedPeriod"),
}
CODED_TYPES = {"Condition", "Procedure", "Observation", "Medication", "MedicationRequest", "MedicationAdministration"}
WITHOUT_PATIENT = {"Patient", "Medication", "Location"}
_KNOWN_TYPES = set(DATE_ELEMENTS) | CODED_TYPES | WITHOUT_PATIENT
_RESULT_PARAMETERS = ("_id", "_count")
_PREFIXES = ("eq", "ne", "gt", "lt", "ge", "le")


class SearchError(ValueError):
    """A search the server rejects (HTTP 400); the message is the OperationOutcome's diagnostics."""


class SearchTimeout(SearchError):
    """A search stopped after the index's timeout (HTTP 503): valid, but too costly to answer."""


def _shown(value: str, limit: int = 60) -> str:
    """A user's value as quoted in a message: long ones cut, so an error never echoes megabytes back."""
    return value if len(value) <= limit else f"{value[:limit]}... ({len(value):,} characters)"


def search_parameters(resource_type: str) -> list[str]:
    """The search parameters a type supports: FHIR's where the element exists in our resources, all for a type
    this module does not know yet (its elements unknown, nothing is ruled out)."""
    known = resource_type in _KNOWN_TYPES
    names = []
    if not known or resource_type not in WITHOUT_PATIENT:
        names += ["patient", "subject"]
    if not known or resource_type in CODED_TYPES:
        names.append("code")
    if not known or resource_type in DATE_ELEMENTS:
        names.append("date")
    return names + list(_RESULT_PARAMETERS)


# --- parsing -------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DateRange:
    lo: datetime  # inclusive, naive local wall clock
    hi: datetime  # exclusive


@dataclass(frozen=True)
class DateParam:
    prefix: str
    range: DateRange


@dataclass(frozen=True)
class Code:
    system: str | None  # None: any system; "" : no system (`|code`)
    code: str | None  # None: any code of the system (`system|`)


@dataclass
class SearchQuery:
    resource_type: str
    patients: list[list[str]] = field(default_factory=list)  # each inner list ORed, the lists ANDed
    codes: list[list[Code]] = field(default_factory=list)
    dates: list[DateParam] = field(default_factory=list)
    ids: list[list[str]] = field(default_factory=list)
    count: int = DEFAULT_COUNT
    offset: int = 0


_DATE = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,6})?)?"
                   r"(Z|[+-]\d{2}:\d{2})?)?)?)?", re.ASCII)


def parse_date(text: str) -> DateRange:
    """A FHIR date/dateTime of any precision as its range in local wall-clock time. A space before the offset is
    read as '+' (an unencoded '+' in a query string arrives as a space)."""
    match = _DATE.fullmatch(text.replace(" ", "+"))
    if not match:
        raise SearchError(f"invalid date '{_shown(text)}': expected YYYY, YYYY-MM, YYYY-MM-DD or "
                          "YYYY-MM-DDThh:mm[:ss[.f]][Z|+hh:mm|-hh:mm]")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        lo = datetime(int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0),
                      int(second or 0), round(float(fraction or 0) * 1_000_000))
        if zone:
            offset = timedelta(0) if zone == "Z" else (
                (1 if zone[0] == "+" else -1) * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
            lo += LOCAL_OFFSET - offset
        if fraction:
            hi = lo + timedelta(microseconds=10 ** (7 - len(fraction)))
        elif second:
            hi = lo + timedelta(seconds=1)
        elif minute:
            hi = lo + timedelta(minutes=1)
        elif day:
            hi = lo + timedelta(days=1)
        elif month:
            hi = lo.replace(year=lo.year + 1, month=1) if lo.month == 12 else lo.replace(month=lo.month + 1)
        else:
            hi = lo.replace(year=lo.year + 1)
    except (ValueError, OverflowError) as exc:  # month 13, February 30, hour 25, year 9999 at +14:00, ...
        raise SearchError(f"invalid date '{_shown(text)}': {exc}") from None
    return DateRange(lo, hi)


def parse_date_param(value: str) -> DateParam:
    prefix = value[:2] if value[:2].isalpha() else "eq"
    if prefix not in _PREFIXES:
        raise SearchError(f"unsupported date prefix '{value[:2]}' in '{_shown(value)}'; supported: "
                          f"{', '.join(_PREFIXES)}")
    return DateParam(prefix, parse_date(value[2:] if value[:2].isalpha() else value))


def parse_code(value: str) -> Code:
    if "|" not in value:
        return Code(None, value)
    system, _, code = value.partition("|")
    if not code and not system:
        raise SearchError("invalid code '|': give a code, system|code, |code or system|")
    return Code(system, code or None)


def _split_or(value: str) -> list[str]:
    """Comma-separated alternatives; '\\,' is a literal comma."""
    return [part.replace("\\,", ",") for part in re.split(r"(?<!\\),", value) if part]


def _patient_id(reference: str) -> str | None:
    """The id in `<id>`, `Patient/<id>` or `<base>/Patient/<id>`; None for a reference to another type."""
    head, _, tail = reference.rpartition("/")
    if not head:
        return reference
    return tail if head == "Patient" or head.endswith("/Patient") else None


_DIGITS = re.compile(r"[0-9]{1,18}")  # ASCII digits only: int() also takes '1_000', ' 5' and other scripts' digits


def _integer(name: str, value: str, minimum: int, maximum: int) -> int:
    number = int(value) if _DIGITS.fullmatch(value) else None
    if number is None or not minimum <= number <= maximum:
        raise SearchError(f"invalid {name} '{_shown(value)}': expected an integer from {minimum} to {maximum}")
    return number


def check_format(params: list[tuple[str, str]]) -> None:
    for name, value in params:
        if name == "_format" and value not in FORMATS:
            raise SearchError(f"unsupported _format '{_shown(value)}': this server answers JSON only "
                              f"({', '.join(FORMATS)})")


def parse_search(resource_type: str, params: list[tuple[str, str]]) -> SearchQuery:
    """A search from the query string's (name, value) pairs, strictly: an unknown parameter is an error. Repeated
    parameters are ANDed, comma-separated values ORed; empty values are ignored (FHIR). Searches beyond the bounds
    (MAX_PARAMETERS, MAX_REPEATS, MAX_VALUES, MAX_VALUE_CHARS) are refused, naming the bound."""
    check_size(params)
    check_format(params)
    allowed = search_parameters(resource_type)
    query = SearchQuery(resource_type)
    seen: set[str] = set()
    for name, value in params:
        if name == "_format":
            continue
        if name in ("_total", "_totalMethod"):  # every Bundle carries the exact total; fhirpy's count() asks so
            if name == "_total" and value not in ("", "none", "estimate", "accurate"):
                raise SearchError(f"invalid _total '{_shown(value)}': expected none, estimate or accurate")
            continue
        if name not in allowed and name != "_offset":
            raise SearchError(f"unknown search parameter '{_shown(name)}' for {resource_type}; supported: "
                              f"{', '.join(allowed)} (and _format, _total)")
        if value == "" or (name not in ("date", "_count", "_offset") and not _split_or(value)):  # '' or only commas
            continue
        if name in ("_count", "_offset"):
            if name in seen:
                raise SearchError(f"{name} given more than once")
            if name == "_count":  # more than MAX_COUNT is served as pages of MAX_COUNT (FHIR lets servers do so)
                query.count = min(_integer(name, value, 0, MAX_INTEGER), MAX_COUNT)
            else:
                query.offset = _integer(name, value, 0, MAX_INTEGER)
        elif name in ("patient", "subject"):
            query.patients.append([_patient_id(v) for v in _or_values(name, value, query.patients)])
        elif name == "code":
            query.codes.append([parse_code(v) for v in _or_values(name, value, query.codes)])
        elif name == "date":
            if len(_split_or(value)) > 1:
                raise SearchError(f"invalid date '{_shown(value)}': ORed dates are not supported; repeat date= to "
                                  "AND them")
            query.dates.append(parse_date_param(value))
        elif name == "_id":
            query.ids.append(_or_values(name, value, query.ids))
        seen.add(name)
    return query


def _label(name: str) -> str:
    """A parameter's name in bound messages: patient and subject are one parameter."""
    return "patient/subject" if name in ("patient", "subject") else name


_REPEATABLE = {"patient/subject", "code", "date", "_id"}


def check_size(params: list[tuple[str, str]]) -> None:
    """Refuse a search too big to read, before any parsing: a parameter repeated more than MAX_REPEATS times, more
    than MAX_PARAMETERS parameters, or a value longer than MAX_VALUE_CHARS."""
    for label, repeats in Counter(_label(name) for name, _ in params).items():
        if label in _REPEATABLE and repeats > MAX_REPEATS:
            raise SearchError(f"too many {label} parameters: {repeats:,}; at most {MAX_REPEATS} per search "
                              "(each one is ANDed)")
    if len(params) > MAX_PARAMETERS:
        raise SearchError(f"too many search parameters: {len(params):,}; at most {MAX_PARAMETERS} per search")
    for name, value in params:
        if len(value) > MAX_VALUE_CHARS:
            raise SearchError(f"{_shown(name)} value too long: {len(value):,} characters; at most "
                              f"{MAX_VALUE_CHARS:,} per value")


def _or_values(name: str, value: str, groups: list[list]) -> list[str]:
    """The ORed values of one more `name` parameter, refused before any is parsed when with the `groups` parsed
    so far they exceed MAX_VALUES."""
    values = _split_or(value)
    total = len(values) + sum(len(group) for group in groups)
    if total > MAX_VALUES:
        raise SearchError(f"too many {_label(name)} values: {total:,}; at most {MAX_VALUES} per search "
                          "(comma-separated and repeated together)")
    return values


def query_string(query: SearchQuery, params: list[tuple[str, str]], offset: int) -> str:
    """The query string of a page of the same search: the given parameters (paging ones replaced)."""
    kept = [(n, v) for n, v in params if n not in ("_count", "_offset")]
    return urlencode([*kept, ("_count", str(query.count)), *([("_offset", str(offset))] if offset else [])])


# --- index ---------------------------------------------------------------------------------------------------------

_CODING = [{"system": "VARCHAR", "code": "VARCHAR"}]


def _date_elements_shape() -> dict:
    """The json_transform structure reading every date element of DATE_ELEMENTS as text."""
    shape: dict = {}
    for paths in DATE_ELEMENTS.values():
        for path in paths:
            *parents, leaf = path.split(".")
            node = shape
            for parent in parents:
                node = node.setdefault(parent, {})
            node[leaf] = {"start": "VARCHAR", "end": "VARCHAR"} if leaf.endswith("eriod") else "VARCHAR"
    return shape


_SHAPE = {
    **_date_elements_shape(),
    "code": {"coding": _CODING},
    "medicationCodeableConcept": {"coding": _CODING},
    "medicationReference": {"reference": "VARCHAR"},
    "encounter": {"reference": "VARCHAR"},
}

# FHIR date text -> [lo, hi) as naive local wall-clock timestamps, the SQL twin of parse_date (tested against it);
# casts and substrings rather than regular expressions, which cost several times more over millions of values.
_MACROS = f"""
create or replace macro fhir_zone_minutes(v) as case
    when right(v, 1) = 'Z' then 0
    when substr(v, -6, 1) in ('+', '-') and substr(v, -3, 1) = ':' then
        (case substr(v, -6, 1) when '-' then -1 else 1 end)
        * (cast(substr(v, -5, 2) as int) * 60 + cast(substr(v, -2, 2) as int)) end;
create or replace macro fhir_fraction(v) as
    case when substr(v, 20, 1) = '.' then regexp_extract(v, '^.{{20}}(\\d{{1,6}})', 1) else '' end;
create or replace macro fhir_lo(v) as case length(v)
    when 4 then make_timestamp(try_cast(v as bigint), 1, 1, 0, 0, 0)
    when 7 then cast(try_cast(v || '-01' as date) as timestamp)
    when 10 then cast(try_cast(v as date) as timestamp)
    else try_cast(substr(v, 1, 19) as timestamp)
         + to_microseconds(coalesce(try_cast(rpad(fhir_fraction(v), 6, '0') as bigint), 0))
         + to_minutes(coalesce({int(LOCAL_OFFSET.total_seconds()) // 60} - fhir_zone_minutes(v), 0)) end;
create or replace macro fhir_precision(v) as case length(v)
    when 4 then interval 1 year when 7 then interval 1 month when 10 then interval 1 day
    else case fhir_fraction(v) when '' then interval 1 second
         else to_microseconds(cast(10 ** (6 - length(fhir_fraction(v))) as bigint)) end end;
"""


def _date_text(side: str) -> str:
    """SQL for the text of a resource's date (a dateTime, or one side of a Period) from its type's elements.
    Choice alternatives exclude each other, so the first present one is the resource's."""
    types = []
    for resource_type, paths in DATE_ELEMENTS.items():
        columns = []
        for path in paths:
            column = "r." + ".".join(f'"{p}"' for p in path.split("."))
            columns.append(f'{column}."{side}"' if path.endswith("eriod") else column)
        types.append(f"when '{resource_type}' then coalesce({', '.join(columns)})")
    return f"case resource_type {' '.join(types)} end"


def _reference_id(expression: str) -> str:
    return f"nullif(split_part({expression}, '/', -1), '')"


@dataclass
class SearchResult:
    total: int
    ids: list[str]


class SearchIndex:
    """The build's resources with, per resource, its type, id, patient, codes and date range, in an in-memory
    DuckDB that also attaches the resources file read-only. Safe across threads: every call uses its own cursor.
    Every call is one statement, interrupted after `timeout_s` (SearchTimeout)."""

    def __init__(self, resources_db: Path, *, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.timeout_s = timeout_s
        self._con = duckdb.connect(":memory:")
        self._lock = threading.Lock()  # cursor() on a shared connection is not documented as thread-safe
        self._con.execute("set enable_progress_bar = false")
        path = str(resources_db).replace("'", "''")
        self._con.execute(f"attach '{path}' as src (read_only)")  # the build's file is never written
        self._con.execute(_MACROS)
        self._build()
        self.types: dict[str, int] = dict(self._con.execute(
            "select type, count(*) from idx group by type order by type").fetchall())

    def _build(self) -> None:
        shape = json.dumps(_SHAPE).replace("'", "''")
        # The only pass over the JSON; everything after works on the extracted columns.
        self._con.execute(f"""
            create temp table scan as
            select resource_type as type, id, patient_id as patient,
                   {_date_text("start")} as date_start, {_date_text("end")} as date_end,
                   case when resource_type = 'Condition' then {_reference_id("r.encounter.reference")} end
                       as encounter_id,
                   {_reference_id("r.medicationReference.reference")} as medication_id,
                   list_concat(coalesce(r.code.coding, []), coalesce(r.medicationCodeableConcept.coding, []))
                       as codings
            from (select resource_type, id, patient_id, json_transform(resource, '{shape}') as r
                  from src.resources)""")
        # A Period missing a side is open on it. Stable search order = rid: by type, date (undated last), id.
        # A Condition without a date of its own takes its encounter's period.
        self._con.execute("""
            create table idx as
            with dated as (
                select *,
                       case when date_start is null and date_end is not null then timestamp '-infinity'
                            else fhir_lo(date_start) end as lo,
                       case when date_end is null and date_start is not null then timestamp 'infinity'
                            when date_end = date_start then lo + fhir_precision(date_end)
                            else fhir_lo(date_end) + fhir_precision(date_end) end as hi
                from scan),
            encounters as (select id, lo, hi from dated where type = 'Encounter')
            select row_number() over (order by d.type, coalesce(d.lo, e.lo) nulls last, d.id) as rid,
                   d.type, d.id, d.patient, coalesce(d.lo, e.lo) as lo, coalesce(d.hi, e.hi) as hi,
                   d.codings, d.medication_id
            from dated d left join encounters e on e.id = case when d.lo is null then d.encounter_id end""")
        self._con.execute("drop table scan")
        # A resource's codes: its own codings and, for a medicationReference, the referenced Medication's.
        self._con.execute("""
            create table codes as
            with own as (select rid, unnest(codings) as c from idx),
                 medication as (select id, unnest(codings) as c from idx where type = 'Medication')
            select rid, c.system as system, c.code as code from own where c.code is not null
            union all
            select i.rid, m.c.system, m.c.code from idx i join medication m on m.id = i.medication_id
            where m.c.code is not null""")
        self._con.execute("alter table idx drop column codings")
        self._con.execute("alter table idx drop column medication_id")

    def cursor(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            return self._con.cursor()

    def close(self) -> None:
        self._con.close()

    def read(self, resource_type: str, resource_id: str) -> str | None:
        rows = self._fetch("select resource::varchar from src.resources where resource_type = ? and id = ?",
                           [resource_type, resource_id], f"reading {resource_type}/{_shown(resource_id)}", "")
        return rows[0][0] if rows else None

    def search(self, query: SearchQuery) -> SearchResult:
        # One statement for the total and the page: an interrupt between two statements would be lost.
        where, args = _where(query)
        page = f"select rid, id from idx where {where} order by rid limit ? offset ?"
        ((total, ids),) = self._fetch(
            f"select (select count(*) from idx where {where}), (select list(id order by rid) from ({page}))",
            [*args, *args, query.count, query.offset], "the search",
            "; narrow the search (patient, code, date) or lower _count")
        return SearchResult(total, ids or [])

    def resources(self, resource_type: str, ids: list[str]) -> list[str]:
        """The resources' JSON texts in the order of `ids`."""
        if not ids:
            return []
        rows = dict(self._fetch("select id, resource::varchar from src.resources where resource_type = ? and id in "
                                "(select unnest(?::varchar[]))", [resource_type, ids],
                                f"reading the page's {len(ids)} {resource_type} resources", "; lower _count"))
        return [rows[i] for i in ids]

    def _fetch(self, sql: str, args: list, what: str, advice: str) -> list[tuple]:
        """The rows of one statement on its own cursor, interrupted once timeout_s has passed."""
        with self.cursor() as cur, _interrupted_after(self.timeout_s, cur) as deadline:
            try:
                return cur.execute(sql, args).fetchall()
            except duckdb.InterruptException:
                if deadline.is_set():
                    raise SearchTimeout(f"{what} exceeded {self.timeout_s:g} s and was stopped{advice}") from None
                raise


@contextmanager
def _interrupted_after(timeout_s: float, cursor: duckdb.DuckDBPyConnection):
    """Interrupt the cursor's statement once timeout_s has passed (DuckDB has no statement timeout of its own);
    yields an Event set when it did."""
    fired = threading.Event()

    def interrupt() -> None:
        fired.set()
        cursor.interrupt()

    timer = threading.Timer(timeout_s, interrupt)
    timer.daemon = True
    timer.start()
    try:
        yield fired
    finally:
        timer.cancel()


_DATE_SQL = {
    "eq": "(lo >= ? and hi <= ?)",
    "ne": "not (lo >= ? and hi <= ?)",
    "gt": "hi > ?",
    "lt": "lo < ?",
    "ge": "(hi > ? or (lo >= ? and hi <= ?))",
    "le": "(lo < ? or (lo >= ? and hi <= ?))",
}


def _date_args(param: DateParam) -> list[datetime]:
    lo, hi = param.range.lo, param.range.hi
    return {"eq": [lo, hi], "ne": [lo, hi], "gt": [hi], "lt": [lo], "ge": [hi, lo, hi],
            "le": [lo, lo, hi]}[param.prefix]


def _where(query: SearchQuery) -> tuple[str, list]:
    clauses, args = ["type = ?"], [query.resource_type]
    for alternatives in query.patients:
        ids = [i for i in alternatives if i is not None]
        clauses.append(f"patient in ({', '.join('?' * len(ids))})" if ids else "false")
        args += ids
    for alternatives in query.ids:
        clauses.append(f"id in ({', '.join('?' * len(alternatives))})")
        args += alternatives
    for alternatives in query.codes:
        tests = []
        for code in alternatives:
            parts = []
            if code.system == "":
                parts.append("system is null")
            elif code.system is not None:
                parts.append("system = ?")
                args.append(code.system)
            if code.code is not None:
                parts.append("code = ?")
                args.append(code.code)
            tests.append(f"({' and '.join(parts)})")
        clauses.append(f"rid in (select rid from codes where {' or '.join(tests)})")
    for param in query.dates:
        clauses.append(_DATE_SQL[param.prefix])
        args += _date_args(param)
    return " and ".join(clauses), args
