"""Generate questions from templates on one agent-facing database: seeded value sampling, gold SQL executed in
DuckDB (the answer) and, transpiled, in SQLite (the exported database; both answers are kept for validation).

Reproducibility: each (template, database) draws from its own generator, seeded by the build seed and the
template id, so adding or editing one template does not change the questions of the others. Candidate values are
read in a total order (ORDER BY ALL) before drawing.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from ehrbench.ehrsql.scoring import format_answer
from ehrbench.questions.dialects import UntranspilableSql, to_sqlite
from ehrbench.questions.instantiate import Instance, InstantiationError, instantiate
from ehrbench.questions.templates import Template
from ehrbench.seeding import keyed_rng
from ehrbench.statement_deadline import interrupted_after
from ehrbench.warehouse import open_duckdb, open_sqlite_read_only


def current_time_sentence(current_time: str) -> str:
    """What an agent is told of 'now': the relative time expressions of a question are read against it (EHRSQL-2024
    fixes it at 2100-12-31 23:59:00 and tells participants so; EHR-ChatQA states it in the agent's rules)."""
    return f"Assume the current time is {current_time}."


@dataclass(frozen=True)
class GenerationSettings:
    per_template: int = 5  # questions per (template, database)
    empty_share: float = 0.2  # share of a template's questions that may keep an empty answer (labelled)
    attempts: int = 8  # draws per wanted question before a template gives up
    timeout_s: float = 10.0  # per gold query and dialect
    workers: int = 2  # threads running templates (the machine's cores)
    unanswerable_share: float | None = 0.2  # of a database's questions (EHRSQL-2024 valid: 20 %); None: all of them
    seed: int = 0


@dataclass
class GeneratedQuestion:
    """One generated question with its gold; `question` is the template's wording until a paraphraser runs."""

    question_id: str
    suite: str  # ehrsql (the FHIR suite's rows are made from these: suites.fhir_questions)
    db: str  # mimic_iv | eicu (ehrbench.questions.templates.DATABASES)
    template_id: str  # for unanswerable questions also their category
    category: str
    is_answerable: bool
    patient_scoped: bool
    question: str
    template_question: str
    slot_values: str  # JSON: value slot -> sampled value
    slot_texts: str  # JSON: slot -> its text in the question (values, operators, time expressions)
    time_kinds: str  # JSON: time slot -> kind
    current_time: str
    gold_sql_duckdb: str | None
    gold_sql_sqlite: str | None  # transpiled (ehrbench.questions.dialects), for the exported SQLite database
    answer: str | None  # JSON rows (None: unanswerable or failed)
    answer_text: str | None  # EHRSQL-2024 answer string of the rows
    answer_rows: int | None
    empty_answer: bool
    empty_by_design: bool  # an empty answer kept on purpose (labelled)
    max_rows: int
    execution_s: float | None
    execution_error: str | None
    sqlite_answer_text: str | None
    sqlite_error: str | None
    paraphrase_source: str = "template"  # template | offline:<n> | llm:<model>
    paraphrase_keeps_slots: bool = True  # every slot text of slot_texts occurs in `question`
    fhir_ids: list[str] | None = None  # FHIR suite: the resources the answer needs
    context: str | None = None  # what the agent is told besides the question: the current-time sentence
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        record = asdict(self)
        record["extra"] = json.dumps(self.extra, sort_keys=True)
        return record


_ARROW_TYPES = {str: pa.string(), "str": pa.string(), "str | None": pa.string(), "bool": pa.bool_(),
                "int": pa.int64(), "int | None": pa.int64(), "float | None": pa.float64(), "dict": pa.string(),
                "list[str] | None": pa.list_(pa.string())}
# the columns of question files (parquet), fixed so that a file with no rows, or only NULLs in a column, reads the same
QUESTION_SCHEMA = pa.schema([(f.name, _ARROW_TYPES[f.type]) for f in GeneratedQuestion.__dataclass_fields__.values()])


class QueryTimeout(RuntimeError):
    pass


def generate_questions(templates: list[Template], database: str, duckdb_path: Path, sqlite_path: Path,
                       now: datetime, settings: GenerationSettings) -> list[GeneratedQuestion]:
    """Questions of every template that has `database`, in template order; see the module doc. Templates run on
    `settings.workers` threads (DuckDB and SQLite release the GIL while they execute); each template draws from its
    own generator, so the result does not depend on the number of threads."""
    connections = _Connections(duckdb_path, sqlite_path, settings.workers)
    candidates = _Candidates(connections)
    asked = [t for t in templates if t.asks(database)]
    try:
        with ThreadPoolExecutor(max_workers=settings.workers) as pool:
            made = list(pool.map(lambda t: _template_questions(t, database, connections, candidates, now, settings),
                                 asked))
    finally:
        connections.close()
    answerable = [q for template, items in zip(asked, made, strict=True) if template.answerable for q in items]
    unanswerable = {t.id: items for t, items in zip(asked, made, strict=True) if not t.answerable}
    share = settings.unanswerable_share
    if share is None:
        return answerable + [q for items in unanswerable.values() for q in items]
    wanted = round(len(answerable) * share / (1 - share))
    return answerable + _spread(unanswerable, wanted, keyed_rng(settings.seed, database))


class _Connections:
    """One DuckDB cursor and one SQLite connection per thread, on the agent-facing files opened read-only. The
    cursors share one in-memory database, where the candidate tables live."""

    def __init__(self, duckdb_path: Path, sqlite_path: Path, workers: int = 1):
        self.main = open_duckdb(":memory:")
        # The templates' threads are the parallelism; a gold query gets the cores left to each (one on 2 cores: 8 %
        # faster on the demo than two, and the rows of an answer whose SQL orders none of them come in the same order
        # in every run, which with two threads 25 of the demo's 1,711 answers did not).
        self.main.execute(f"set threads = {max(1, (os.cpu_count() or 1) // workers)}")
        self.main.execute(f"attach '{duckdb_path}' as agent (read_only)")
        self._sqlite_path = sqlite_path
        self._local = threading.local()
        self._opened: list = []
        self._lock = threading.Lock()

    def duckdb(self) -> duckdb.DuckDBPyConnection:
        if not hasattr(self._local, "duckdb"):
            with self._lock:
                cursor = self.main.cursor()
                self._opened.append(cursor)
            cursor.execute("use agent")
            self._local.duckdb = cursor
        return self._local.duckdb

    def sqlite(self) -> sqlite3.Connection:
        if not hasattr(self._local, "sqlite"):
            connection = open_sqlite_read_only(self._sqlite_path, check_same_thread=False)
            with self._lock:
                self._opened.append(connection)
            self._local.sqlite = connection
        return self._local.sqlite

    def close(self) -> None:
        for connection in self._opened:
            connection.close()
        self.main.close()


def _spread(by_template: dict[str, list[GeneratedQuestion]], wanted: int,
            rng: np.random.Generator) -> list[GeneratedQuestion]:
    """`wanted` questions taken round-robin over the templates (in order; each template's questions shuffled), so
    that every unanswerable category is asked before any is asked twice."""
    queues = [list(rng.permutation(len(items))) for items in by_template.values()]
    lists = list(by_template.values())
    chosen: list[GeneratedQuestion] = []
    while len(chosen) < wanted and any(queues):
        for queue, items in zip(queues, lists, strict=True):
            if queue and len(chosen) < wanted:
                chosen.append(items[int(queue.pop(0))])
    return chosen


def _template_questions(template: Template, database: str, connections: _Connections, candidates: _Candidates,
                        now: datetime, settings: GenerationSettings) -> list[GeneratedQuestion]:
    con, sqlite = connections.duckdb(), connections.sqlite()
    rng = keyed_rng(settings.seed, template.id, database)
    pool = candidates.table(template.values[database]) if template.values.get(database) else None
    if pool is not None and pool.size == 0:
        return []
    allowed_empty = int(round(settings.empty_share * settings.per_template))
    kept: dict[str, GeneratedQuestion] = {}
    empties = 0
    for _ in range(settings.per_template * settings.attempts):
        if len(kept) >= settings.per_template:
            break
        row = pool.row(con, int(rng.integers(pool.size))) if pool is not None else {}
        instance = instantiate(template, database, row, rng, now)
        question_id = _question_id(database, template.id, instance.question)
        if question_id in kept:
            continue
        question = _execute(instance, question_id, con, sqlite, now, settings)
        if question.empty_answer:
            if empties >= allowed_empty:
                continue
            empties += 1
            question.empty_by_design = True
        kept[question_id] = question
    return list(kept.values())


def _execute(instance: Instance, question_id: str, con, sqlite, now: datetime,
             settings: GenerationSettings) -> GeneratedQuestion:
    template = instance.template
    record = GeneratedQuestion(
        question_id=question_id, suite="ehrsql", db=instance.database, template_id=template.id,
        category=template.category, is_answerable=template.answerable, patient_scoped=template.patient_scoped,
        question=instance.question,
        template_question=instance.question, slot_values=json.dumps(instance.values, default=json_value),
        slot_texts=json.dumps(instance.slot_texts),
        time_kinds=json.dumps({slot: t.kind for slot, t in instance.times.items()}),
        current_time=f"{now:%Y-%m-%d %H:%M:%S}", context=current_time_sentence(f"{now:%Y-%m-%d %H:%M:%S}"),
        gold_sql_duckdb=instance.sql or None, gold_sql_sqlite=None,
        answer=None,
        answer_text=None, answer_rows=None, empty_answer=False, empty_by_design=False, max_rows=template.max_rows,
        execution_s=None, execution_error=None, sqlite_answer_text=None, sqlite_error=None)
    if not template.answerable:
        return record
    started = time.perf_counter()
    try:
        rows = [tuple(plain_cell(cell) for cell in row) for row in run_duckdb(con, instance.sql, settings.timeout_s)]
    except (duckdb.Error, QueryTimeout) as exc:
        record.execution_error = f"{type(exc).__name__}: {exc}"[:500]
        return record
    finally:
        record.execution_s = round(time.perf_counter() - started, 4)
    record.answer = json.dumps(rows, default=json_value)
    record.answer_text = format_answer(rows)
    record.answer_rows = len(rows)
    record.empty_answer = all(cell is None for row in rows for cell in row)  # no rows, or only NULLs
    try:
        record.gold_sql_sqlite = to_sqlite(instance.sql)
        sqlite_rows = run_sqlite(sqlite, record.gold_sql_sqlite, settings.timeout_s)
        record.sqlite_answer_text = format_answer([tuple(plain_cell(c) for c in row) for row in sqlite_rows])
    except (sqlite3.Error, QueryTimeout, UntranspilableSql, ValueError) as exc:
        record.sqlite_error = f"{type(exc).__name__}: {exc}"[:500]
    return record


def run_duckdb(con: duckdb.DuckDBPyConnection, sql: str, timeout_s: float) -> list[tuple]:
    with interrupted_after(timeout_s, con.interrupt):
        try:
            return con.execute(sql).fetchall()
        except duckdb.InterruptException:
            raise QueryTimeout(f"gold SQL ran longer than {timeout_s} s") from None


def run_sqlite(con: sqlite3.Connection, sql: str, timeout_s: float) -> list[tuple]:
    # Interrupted by the watchdog thread, not by a progress handler: a handler is Python code that SQLite calls every
    # few thousand instructions, each call waiting for the GIL, which the stage's other threads hold for up to the
    # switch interval (5 ms) at a time (beside one busy thread, a demo build's gold queries took 5x as long with it).
    with interrupted_after(timeout_s, con.interrupt) as deadline:
        try:
            return con.execute(sql).fetchall()
        except sqlite3.OperationalError:
            if deadline.fired:
                raise QueryTimeout(f"gold SQL ran longer than {timeout_s} s in SQLite") from None
            raise


def plain_cell(cell: object) -> object:
    """One answer cell as the exported SQLite database returns it: booleans as 0/1, decimals as floats, times as
    'YYYY-MM-DD HH:MM:SS' text."""
    if isinstance(cell, bool):
        return int(cell)
    if isinstance(cell, Decimal):
        return float(cell)
    if isinstance(cell, datetime):
        return f"{cell:%Y-%m-%d %H:%M:%S}"
    if isinstance(cell, date):
        return cell.isoformat()
    return cell


def json_value(value: object) -> object:
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return str(value)


def _question_id(database: str, template_id: str, question: str) -> str:
    return hashlib.sha1(f"{database}|{template_id}|{question}".encode()).hexdigest()[:24]



class _Pool:
    def __init__(self, table: str, size: int):
        self._table, self.size = table, size

    def row(self, con: duckdb.DuckDBPyConnection, index: int) -> dict:
        cursor = con.execute(f"select * from {self._table} where rowid = ?", [index])
        names = [d[0] for d in cursor.description]
        return dict(zip(names, cursor.fetchone(), strict=True))


class _Candidates:
    """Candidate value rows per values query, materialised once (by the first thread that needs them) in a total
    order, in the in-memory database all cursors share."""

    def __init__(self, connections: _Connections):
        self._connections = connections
        self._pools: dict[str, _Pool] = {}
        self._lock = threading.Lock()

    def table(self, sql: str) -> _Pool:
        with self._lock:
            if sql not in self._pools:
                name = f"memory.main.candidates_{len(self._pools)}"
                con = self._connections.duckdb()
                try:
                    # inserted in ORDER BY ALL order (insertion order is kept), so rowid numbers the rows in it
                    con.execute(f"create table {name} as select distinct * from ({sql}) order by all")
                except duckdb.Error as exc:
                    raise InstantiationError(f"values query failed: {exc}\n{sql}") from None
                size = con.execute(f"select count(*) from {name}").fetchone()[0]
                self._pools[sql] = _Pool(name, size)
            return self._pools[sql]
