"""Time expressions: the SQL of each kind selects the rows its phrase means, in DuckDB and (transpiled) in SQLite."""

import sqlite3
from datetime import datetime

import duckdb
import numpy as np
import pytest

from ehrbench.questions.dialects import to_sqlite
from ehrbench.questions.time_filters import TimeFilter, draw_exact, draw_global, draw_within, sqlite_months_before

NOW = datetime(2100, 12, 31, 23, 59)
TIMES = ["2099-06-01 08:00:00", "2100-01-15 10:00:00", "2100-11-02 09:30:00", "2100-11-30 23:00:00",
         "2100-12-11 07:00:00", "2100-12-30 12:00:00", "2100-12-31 01:00:00"]


def _select(condition: str) -> tuple[list[str], list[str]]:
    """The times a `AND <condition>` fragment keeps, in DuckDB and in SQLite (times stored as text, as exported)."""
    sql = f"select strftime(e.t, '%Y-%m-%d %H:%M:%S') from e where true {condition} order by e.t"
    duck = duckdb.connect()
    duck.execute("create table e (t timestamp)")
    duck.executemany("insert into e values (?)", [[t] for t in TIMES])
    lite = sqlite3.connect(":memory:")
    lite.execute("create table e (t text)")
    lite.executemany("insert into e values (?)", [[t] for t in TIMES])
    return [r[0] for r in duck.execute(sql).fetchall()], [r[0] for r in lite.execute(to_sqlite(sql)).fetchall()]


@pytest.mark.parametrize(("kind", "text", "params", "expected"), [
    ("abs-year-in", "in 2099", {"value": "2099"}, TIMES[:1]),
    ("abs-month-in", "in 11/2100", {"value": "2100-11"}, TIMES[2:4]),
    ("abs-day-since", "since 12/30/2100", {"value": "2100-12-30"}, TIMES[5:]),
    ("abs-month-until", "until 01/2100", {"value": "2100-01"}, TIMES[:2]),
    ("rel-year", "last year", {"back": 1}, TIMES[:1]),
    ("rel-month", "last month", {"back": 1}, TIMES[2:4]),
    ("rel-month", "this month", {"back": 0}, TIMES[4:]),
    ("rel-day", "yesterday", {"back": 1}, TIMES[5:6]),
    ("rel-day", "today", {"back": 0}, TIMES[6:]),
    ("rel-day-since", "since 2 days ago", {"n": 2}, TIMES[5:]),  # 2100-12-29 23:59 onwards
    ("rel-month-since", "since 1 month ago", {"n": 1}, TIMES[4:]),  # 2100-12-01 23:59 onwards (SQLite's 11-31)
    ("mix-month-of-this-year", "in 11/this year", {"month": 11}, TIMES[2:4]),
    ("mix-day-of-this-month", "on this month/11", {"day": 11}, TIMES[4:5]),
])
def test_global_filters_select_what_they_say(kind, text, params, expected):
    duck, lite = _select(TimeFilter(kind, text, NOW, params).on("e.t"))
    assert duck == expected
    assert lite == expected


@pytest.mark.slow
def test_drawn_absolute_and_relative_filters_keep_their_anchor():
    rng = np.random.default_rng(3)
    for anchor_text in TIMES:
        anchor = datetime.fromisoformat(anchor_text)
        for _ in range(20):
            drawn = draw_global(rng, ["absolute", "relative"], NOW, anchor)
            duck, lite = _select(drawn.on("e.t"))
            assert anchor_text in duck, (drawn, duck)
            assert duck == lite, drawn


def test_visit_filters_choose_the_visit_and_leave_event_times_alone():
    first = TimeFilter("hosp-first", "on the first hospital visit", NOW)
    assert first.on("e.t") == ""
    assert first.visit("admissions") == ("AND admissions.dischtime IS NOT NULL ORDER BY admissions.admittime ASC "
                                         "LIMIT 1")
    assert first.visit("icustays") == ""  # a hospital visit does not choose an ICU stay
    assert TimeFilter("icu-current", "on the current ICU visit", NOW).visit("icustays") == \
        "AND icustays.outtime IS NULL"
    with pytest.raises(ValueError, match="admissions, icustays or patient"):
        first.visit("labevents")
    assert TimeFilter("hosp-last", "on the last hospital visit", NOW).visit("patient", "hospital") == (
        "AND patient.hospitaldischargetime IS NOT NULL ORDER BY patient.hospitaladmittime DESC LIMIT 1")
    assert first.visit("patient", "icu") == ""


def test_without_an_anchor_only_visits_or_nothing_are_drawn():
    rng = np.random.default_rng(0)
    kinds = {draw_global(rng, ["absolute", "relative", "hospital_visit"], NOW, None).kind for _ in range(50)}
    assert kinds == {"hosp-first", "hosp-last", "hosp-current"}


def test_exact_orders_and_offsets():
    rng = np.random.default_rng(0)
    seen = {}
    for _ in range(40):
        exact = draw_exact(rng, NOW)
        seen[exact.text] = exact.order("e.t")
    assert seen == {"first": "ORDER BY e.t ASC LIMIT 1", "last": "ORDER BY e.t DESC LIMIT 1",
                    "second": "ORDER BY e.t ASC LIMIT 1 OFFSET 1",
                    "second to last": "ORDER BY e.t DESC LIMIT 1 OFFSET 1"}


def test_within_n_days_bounds_the_second_event():
    rng = np.random.default_rng(1)
    within = next(w for w in (draw_within(rng, NOW, ("within-n-days",)) for _ in range(10)) if w.params["n"] == 2)
    assert within.text == "within 2 days"
    condition = within.between("TIMESTAMP '2100-12-29 12:00:00'", "e.t")
    duck, lite = _select(condition)
    assert duck == lite == TIMES[5:]  # 12-30 12:00 and 12-31 01:00 lie within 2 days of 12-29 12:00


@pytest.mark.parametrize(("months", "expected"), [
    (10, "2100-03-03 23:59:00"), (1, "2100-12-01 23:59:00"), (12, "2099-12-31 23:59:00"), (2, "2100-10-31 23:59:00")])
def test_months_before_now_are_counted_as_sqlite_counts_them(months, expected):
    lite = sqlite3.connect(":memory:")
    (sqlite_says,) = lite.execute(f"select datetime('2100-12-31 23:59:00', '-{months} month')").fetchone()
    assert sqlite_says == expected
    assert f"{sqlite_months_before(NOW, months):%Y-%m-%d %H:%M:%S}" == expected


# the SQLite forms of docs/benchmarks.md#ehrsql-time-expressions-and-operators (EHRSQL's gold SQL)
@pytest.mark.parametrize(("time_filter", "documented"), [
    (TimeFilter("abs-year-in", "in 2100", NOW, {"value": "2100"}), "STRFTIME('%Y', e.t) = '2100'"),
    (TimeFilter("abs-month-since", "since 12/2100", NOW, {"value": "2100-12"}), "STRFTIME('%Y-%m', e.t) >= '2100-12'"),
    (TimeFilter("rel-year", "last year", NOW, {"back": 1}),
     "DATETIME(e.t, 'start of year') = DATETIME('2100-12-31 23:59:00', 'start of year', '-1 year')"),
    (TimeFilter("rel-day", "yesterday", NOW, {"back": 1}),
     "DATETIME(e.t, 'start of day') = DATETIME('2100-12-31 23:59:00', 'start of day', '-1 day')"),
    (TimeFilter("rel-day-since", "since 30 days ago", NOW, {"n": 30}),
     "e.t >= DATETIME('2100-12-31 23:59:00', '-30 day')"),
])
def test_global_filters_transpile_to_ehrsqls_sqlite_forms(time_filter, documented):
    sql = to_sqlite(f"select 1 from e where true {time_filter.on('e.t')}")
    assert sql == f"SELECT 1 FROM e WHERE TRUE AND {documented}"


def test_exact_and_within_transpile_to_ehrsqls_sqlite_forms():
    second_to_last = TimeFilter("exact-second-to-last", "second to last", NOW)
    assert to_sqlite(f"select e.t from e {second_to_last.order('e.t')}") == (
        "SELECT e.t FROM e ORDER BY e.t DESC LIMIT 1 OFFSET 1")
    within = TimeFilter("within-n-days", "within 2 days", NOW, {"n": 2})
    assert to_sqlite(f"select 1 from t1, t2 where true {within.between('t1.t', 't2.t')}") == (
        "SELECT 1 FROM t1, t2 WHERE TRUE AND t2.t BETWEEN t1.t AND DATETIME(t1.t, '+2 day')")
