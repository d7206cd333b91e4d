"""FHIR R4 search over a build's `fhir/resources.duckdb`: an in-memory index built once from the resources' JSON, and
the SQL that answers a SearchQuery (search_params.py parses one) from it. Dates are compared as search_params.py
describes. The index stops any statement after its timeout (SearchTimeout): a search is answered or refused within
seconds, never left running.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb

from ehrbench.fhir.search_params import (
    DATE_ELEMENTS,
    DEFAULT_TIMEOUT_S,
    LOCAL_OFFSET,
    DateParam,
    SearchQuery,
    SearchTimeout,
    shown_value,
)
from ehrbench.statement_deadline import interrupted_after
from ehrbench.warehouse import open_duckdb

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
        self._con = open_duckdb(":memory:")
        self._lock = threading.Lock()  # cursor() on a shared connection is not documented as thread-safe
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
                           [resource_type, resource_id], f"reading {resource_type}/{shown_value(resource_id)}", "")
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
        with self.cursor() as cur, interrupted_after(self.timeout_s, cur.interrupt) as deadline:
            try:
                return cur.execute(sql, args).fetchall()
            except duckdb.InterruptException:
                if deadline.fired:
                    raise SearchTimeout(f"{what} exceeded {self.timeout_s:g} s and was stopped{advice}") from None
                raise


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
