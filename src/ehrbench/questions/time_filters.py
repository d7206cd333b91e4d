"""Time expressions of the EHRSQL templates (docs/benchmarks.md#ehrsql-time-expressions-and-operators): one
natural-language phrase and the DuckDB SQL it means.

Three slot families:
- global (`{time}`): a filter on an event time (absolute year/month/day "in", "since", "until"; relative "last
  year", "this month", "since 30 days ago", "yesterday"; mixed "in 11/this year") or a choice of hospital / ICU
  visit ("on the first hospital visit", "on the current ICU visit"), which the template applies to its admissions /
  icustays subquery;
- exact (`{exact}`): first / last / second / second-to-last (ORDER BY … LIMIT 1 [OFFSET 1]);
- within (`{within}`): the second event within the same hospital visit / day / month, or n days / months after
  the first.

Absolute and relative filters are drawn around an *anchor* (an event time of the sampled values), so that the
anchor satisfies the filter and the question has an answer; the gold answer is executed anyway.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

GLOBAL_FAMILIES = ("none", "absolute", "relative", "hospital_visit", "icu_visit")
EXACT_KINDS = ("exact-first", "exact-last", "exact-second", "exact-second-to-last")
WITHIN_KINDS = ("within-hospital-visit", "within-day", "within-month", "within-n-days", "within-n-months")
_NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight",
                 9: "nine", 10: "ten"}


def timestamp_sql(moment: datetime) -> str:
    return f"TIMESTAMP '{moment:%Y-%m-%d %H:%M:%S}'"


@dataclass(frozen=True)
class TimeFilter:
    """One drawn time expression. `text` is its phrase in the question ("" when the slot is left out)."""

    kind: str
    text: str
    now: datetime
    params: dict = field(default_factory=dict)

    # -- global filters -------------------------------------------------------------------------------------
    def on(self, column: str) -> str:
        """`AND <condition on column>` for absolute / relative kinds; "" for visits and none."""
        p, now = self.params, timestamp_sql(self.now)
        kind = self.kind
        if kind.startswith("abs-"):
            _, grain, op = kind.split("-")
            fmt = {"year": "%Y", "month": "%Y-%m", "day": "%Y-%m-%d"}[grain]
            return f"AND strftime({column}, '{fmt}') {_OPERATORS[op]} '{p['value']}'"
        if kind in ("rel-year", "rel-month", "rel-day"):
            grain = kind.split("-")[1]
            return (f"AND date_trunc('{grain}', {column}) = "
                    f"date_trunc('{grain}', {now}) - INTERVAL {p['back']} {grain.upper()}")
        if kind == "rel-day-since":
            return f"AND {column} >= {now} - INTERVAL {p['n']} DAY"
        if kind in ("rel-year-since", "rel-month-since"):
            # DuckDB clamps 12-31 minus 10 months to 02-28, SQLite (EHRSQL's gold) rolls it over to 03-03: the
            # threshold is written out, as SQLite computes it, so that both dialects ask the same question.
            months = p["n"] * (12 if kind == "rel-year-since" else 1)
            return f"AND {column} >= {timestamp_sql(sqlite_months_before(self.now, months))}"
        if kind == "mix-month-of-this-year":
            return (f"AND date_trunc('year', {column}) = date_trunc('year', {now}) "
                    f"AND strftime({column}, '%m') = '{p['month']:02d}'")
        if kind == "mix-day-of-this-month":
            return (f"AND date_trunc('month', {column}) = date_trunc('month', {now}) "
                    f"AND strftime({column}, '%d') = '{p['day']:02d}'")
        return ""

    def visit(self, table: str, unit: str | None = None) -> str:
        """For a visit kind: the visit choice to end `table`'s subquery with ("" for other kinds, and for a hospital
        visit asked of an ICU table or the reverse). Tables: admissions (hospital), icustays (ICU), and eICU's
        patient, whose rows are ICU stays of hospital stays: pass unit='hospital' or 'icu'."""
        key = (table, unit or {"admissions": "hospital", "icustays": "icu"}.get(table))
        if key not in _VISIT_COLUMNS:
            raise ValueError(f"visit filters apply to admissions, icustays or patient (unit 'hospital' or 'icu'), "
                             f"not {table!r} (unit {unit!r})")
        scope = "hosp" if key[1] == "hospital" else "icu"
        if not self.kind.startswith(scope + "-"):
            return ""
        start, end = _VISIT_COLUMNS[key]
        which = self.kind.split("-", 1)[1]
        if which == "current":
            return f"AND {table}.{end} IS NULL"
        order = "ASC" if which == "first" else "DESC"
        return f"AND {table}.{end} IS NOT NULL ORDER BY {table}.{start} {order} LIMIT 1"

    # -- exact ------------------------------------------------------------------------------------------------
    def order(self, column: str) -> str:
        """ORDER BY column ASC|DESC LIMIT 1 [OFFSET 1] for an exact kind."""
        if self.kind not in EXACT_KINDS:
            raise ValueError(f"{self.kind} is not an exact time expression; expected one of {EXACT_KINDS}")
        direction = "ASC" if self.kind in ("exact-first", "exact-second") else "DESC"
        offset = " OFFSET 1" if self.kind in ("exact-second", "exact-second-to-last") else ""
        return f"ORDER BY {column} {direction} LIMIT 1{offset}"

    @property
    def direction(self) -> str:
        return "ASC" if self.kind in ("exact-first", "exact-second") else "DESC"

    # -- within ----------------------------------------------------------------------------------------------
    def between(self, first_time: str, second_time: str, first_visit: str | None = None,
                second_visit: str | None = None) -> str:
        """`AND <the second event lies within … of the first>`."""
        p = self.params
        if self.kind == "within-hospital-visit":
            if not (first_visit and second_visit):
                raise ValueError("within-hospital-visit needs the two events' hadm_id columns")
            return f"AND {first_visit} = {second_visit}"
        if self.kind in ("within-day", "within-month"):
            grain = self.kind.split("-")[1]
            return f"AND date_trunc('{grain}', {first_time}) = date_trunc('{grain}', {second_time})"
        if self.kind in ("within-n-days", "within-n-months"):
            unit = "DAY" if self.kind == "within-n-days" else "MONTH"
            return f"AND {second_time} BETWEEN {first_time} AND {first_time} + INTERVAL {p['n']} {unit}"
        raise ValueError(f"{self.kind} is not a within time expression; expected one of {WITHIN_KINDS}")


_OPERATORS = {"in": "=", "since": ">=", "until": "<="}
# (table, unit) -> the visit's start and end columns
_VISIT_COLUMNS = {("admissions", "hospital"): ("admittime", "dischtime"), ("icustays", "icu"): ("intime", "outtime"),
                  ("patient", "hospital"): ("hospitaladmittime", "hospitaldischargetime"),
                  ("patient", "icu"): ("unitadmittime", "unitdischargetime")}
NONE = "none"


def no_filter(now: datetime) -> TimeFilter:
    return TimeFilter(NONE, "", now)


def draw_global(rng: np.random.Generator, families: list[str], now: datetime,
                anchor: datetime | None) -> TimeFilter:
    """A global time expression of one of `families`, true of `anchor` when absolute or relative.

    Without an anchor, absolute and relative kinds are not drawn (nothing to aim them at)."""
    unknown = sorted(set(families) - set(GLOBAL_FAMILIES))
    if unknown:
        raise ValueError(f"unknown time families {unknown}; expected some of {GLOBAL_FAMILIES}")
    options: list[TimeFilter] = []
    for family in families:
        if family == "none":
            options.append(no_filter(now))
        elif family == "absolute" and anchor is not None:
            options.extend(_absolute(rng, anchor, now))
        elif family == "relative" and anchor is not None:
            options.extend(_relative(rng, anchor, now))
        elif family == "hospital_visit":
            options.extend(_visits("hosp", "hospital", now))
        elif family == "icu_visit":
            options.extend(_visits("icu", "ICU", now))
    if not options:
        return no_filter(now)
    # a family first, then a kind inside it: families with many kinds do not crowd out the others
    by_family: dict[str, list[TimeFilter]] = {}
    for option in options:
        by_family.setdefault(_family(option.kind), []).append(option)
    family = list(by_family)[int(rng.integers(len(by_family)))]
    kinds = by_family[family]
    return kinds[int(rng.integers(len(kinds)))]


def _family(kind: str) -> str:
    if kind == NONE:
        return "none"
    if kind.startswith("abs-"):
        return "absolute"
    if kind.startswith(("rel-", "mix-")):
        return "relative"
    return "hospital_visit" if kind.startswith("hosp-") else "icu_visit"


def _absolute(rng: np.random.Generator, anchor: datetime, now: datetime) -> list[TimeFilter]:
    out = []
    for grain, value, text in (("year", f"{anchor:%Y}", f"{anchor:%Y}"),
                               ("month", f"{anchor:%Y-%m}", f"{anchor:%m/%Y}"),
                               ("day", f"{anchor:%Y-%m-%d}", f"{anchor:%m/%d/%Y}")):
        preposition = "on" if grain == "day" else "in"
        out.append(TimeFilter(f"abs-{grain}-in", f"{preposition} {text}", now, {"value": value}))
        out.append(TimeFilter(f"abs-{grain}-since", f"since {text}", now, {"value": value}))
        out.append(TimeFilter(f"abs-{grain}-until", f"until {text}", now, {"value": value}))
    return out


def _relative(rng: np.random.Generator, anchor: datetime, now: datetime) -> list[TimeFilter]:
    out = []
    years_back = now.year - anchor.year
    months_back = years_back * 12 + now.month - anchor.month
    days_back = (now.date() - anchor.date()).days
    if years_back in (0, 1):
        out.append(TimeFilter("rel-year", "this year" if years_back == 0 else "last year", now, {"back": years_back}))
    if months_back in (0, 1):
        out.append(TimeFilter("rel-month", "this month" if months_back == 0 else "last month", now,
                              {"back": months_back}))
    if days_back in (0, 1):
        out.append(TimeFilter("rel-day", "today" if days_back == 0 else "yesterday", now, {"back": days_back}))
    if years_back >= 0:
        n = years_back + 1 + int(rng.integers(0, 2))
        out.append(TimeFilter("rel-year-since", f"since {n} year{'s' if n > 1 else ''} ago", now, {"n": n}))
    if 0 <= months_back < 120:
        n = months_back + 2 + int(rng.integers(0, 12))  # + 2: SQLite's roll-over may push the bound 3 days on
        out.append(TimeFilter("rel-month-since", f"since {n} month{'s' if n > 1 else ''} ago", now, {"n": n}))
    if 0 <= days_back < 1000:
        n = days_back + 1 + int(rng.integers(0, 30))
        out.append(TimeFilter("rel-day-since", f"since {n} day{'s' if n > 1 else ''} ago", now, {"n": n}))
    if years_back == 0:
        out.append(TimeFilter("mix-month-of-this-year", f"in {anchor:%m}/this year", now, {"month": anchor.month}))
        if months_back == 0:
            out.append(TimeFilter("mix-day-of-this-month", f"on this month/{anchor:%d}", now, {"day": anchor.day}))
    return out


def _visits(scope: str, label: str, now: datetime) -> list[TimeFilter]:
    return [TimeFilter(f"{scope}-{which}", f"on the {which} {label} visit", now) for which in ("first", "last",
                                                                                               "current")]


def draw_exact(rng: np.random.Generator, now: datetime, kinds: tuple[str, ...] = EXACT_KINDS) -> TimeFilter:
    kind = kinds[int(rng.integers(len(kinds)))]
    text = {"exact-first": "first", "exact-last": "last", "exact-second": "second",
            "exact-second-to-last": "second to last"}[kind]
    return TimeFilter(kind, text, now)


def draw_within(rng: np.random.Generator, now: datetime, kinds: tuple[str, ...] = WITHIN_KINDS) -> TimeFilter:
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "within-hospital-visit":
        return TimeFilter(kind, "within the same hospital visit", now)
    if kind == "within-day":
        return TimeFilter(kind, "within the same day", now)
    if kind == "within-month":
        return TimeFilter(kind, "within the same month", now)
    n = int(rng.integers(1, 4)) if kind == "within-n-months" else int(rng.integers(1, 8))
    unit = "month" if kind == "within-n-months" else "day"
    return TimeFilter(kind, f"within {n} {unit}{'s' if n > 1 else ''}", now, {"n": n})


def sqlite_months_before(moment: datetime, months: int) -> datetime:
    """`datetime(moment, '-<months> month')` as SQLite computes it: the month moves, the day stays, and a day past
    the month's end rolls over into the next month (12-31 minus 10 months = 03-03)."""
    total = moment.year * 12 + moment.month - 1 - months
    year, month = divmod(total, 12)
    first = moment.replace(year=year, month=month + 1, day=1)
    return first + timedelta(days=moment.day - 1)


def number_word(n: int) -> str:
    return _NUMBER_WORDS.get(n, str(n))


def parse_time(value: object) -> datetime | None:
    """An anchor time from a candidate row (a datetime, a date or ISO text; None stays None)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value
    if hasattr(value, "year") and hasattr(value, "month") and hasattr(value, "day"):
        return datetime(value.year, value.month, value.day)
    return datetime.fromisoformat(str(value))


__all__ = ["TimeFilter", "draw_global", "draw_exact", "draw_within", "no_filter", "timestamp_sql",
           "number_word", "parse_time", "GLOBAL_FAMILIES", "EXACT_KINDS", "WITHIN_KINDS"]
