"""FHIR R4 search parameters: parsing a search's query string into a SearchQuery, with its bounds.

Dates. MIMIC-IV on FHIR (and this project) writes shifted local wall-clock times with a fixed -04:00 offset, so the
index keeps every date as a naive wall-clock timestamp at LOCAL_OFFSET: values with that offset are taken as
written, values with another offset (or Z) are converted to it, values without one are local (FHIR: "the server's
local time"). Search values get the same treatment, so `date=ge2180-07-23` means the wall-clock day as it reads in
the resources and in the SQL databases, and `...T14:00:00Z` means the same instant as `...T10:00:00-04:00`.
Every date is a half-open range [lo, hi) given by its precision (a day, a second, ...); a Period spans from its
start's lo to its end's hi, open on a missing side. Prefixes follow FHIR R4 (search.html#prefix):
eq/ne: the search range (does not) fully contain(s) the resource's; gt/lt: the resource's range reaches after/before
the search range; ge/le: gt/lt or eq. Resources without a date never match a `date` parameter.

Bounds (issue 17): every number is range-checked, and a search holds at most MAX_PARAMETERS parameters, MAX_REPEATS
repeats and MAX_VALUES values of one parameter, so the SQL stays small.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from urllib.parse import urlencode

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


def shown_value(value: str, limit: int = 60) -> str:
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
    # the parameters it was parsed from, less paging (_count, _offset) and _format: what another server is sent
    params: list[tuple[str, str]] = field(default_factory=list)


_DATE = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,6})?)?"
                   r"(Z|[+-]\d{2}:\d{2})?)?)?)?", re.ASCII)


def parse_date(text: str) -> DateRange:
    """A FHIR date/dateTime of any precision as its range in local wall-clock time. A space before the offset is
    read as '+' (an unencoded '+' in a query string arrives as a space)."""
    match = _DATE.fullmatch(text.replace(" ", "+"))
    if not match:
        raise SearchError(f"invalid date '{shown_value(text)}': expected YYYY, YYYY-MM, YYYY-MM-DD or "
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
        raise SearchError(f"invalid date '{shown_value(text)}': {exc}") from None
    return DateRange(lo, hi)


def parse_date_param(value: str) -> DateParam:
    prefix = value[:2] if value[:2].isalpha() else "eq"
    if prefix not in _PREFIXES:
        raise SearchError(f"unsupported date prefix '{value[:2]}' in '{shown_value(value)}'; supported: "
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
        raise SearchError(f"invalid {name} '{shown_value(value)}': expected an integer from {minimum} to {maximum}")
    return number


def check_format(params: list[tuple[str, str]]) -> None:
    for name, value in params:
        if name == "_format" and value not in FORMATS:
            raise SearchError(f"unsupported _format '{shown_value(value)}': this server answers JSON only "
                              f"({', '.join(FORMATS)})")


def parse_search(resource_type: str, params: list[tuple[str, str]], *, lenient: bool = False) -> SearchQuery:
    """A search from the query string's (name, value) pairs. Strictly (the default) an unknown parameter, or one the
    type does not support (`patient` of a Location), is an error; `lenient` (FHIR's `Prefer: handling=lenient`)
    ignores it, as a lenient store does. `id` is read as `_id` (FHIR-AgentBench's client sends `id=`). Repeated
    parameters are ANDed, comma-separated values ORed; empty values are ignored (FHIR). Searches beyond the bounds
    (MAX_PARAMETERS, MAX_REPEATS, MAX_VALUES, MAX_VALUE_CHARS) are refused, naming the bound."""
    params = [("_id" if name == "id" else name, value) for name, value in params]
    check_size(params)
    check_format(params)
    allowed = search_parameters(resource_type)
    query = SearchQuery(resource_type)
    seen: set[str] = set()
    query.params = [(n, v) for n, v in params if n not in ("_format", "_count", "_offset")]
    for name, value in params:
        if name == "_format" or (lenient and name not in allowed and name != "_offset"):
            continue
        if name in ("_total", "_totalMethod"):  # every Bundle carries the exact total; fhirpy's count() asks so
            if name == "_total" and value not in ("", "none", "estimate", "accurate"):
                raise SearchError(f"invalid _total '{shown_value(value)}': expected none, estimate or accurate")
            continue
        if name not in allowed and name != "_offset":
            raise SearchError(f"unknown search parameter '{shown_value(name)}' for {resource_type}; supported: "
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
                raise SearchError(f"invalid date '{shown_value(value)}': ORed dates are not supported; repeat date= to "
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
            raise SearchError(f"{shown_value(name)} value too long: {len(value):,} characters; at most "
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
