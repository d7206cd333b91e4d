"""Trial results as parquet: one part per finished batch under `<results>/run_id=<id>/` (hive-partitioned, so
DuckDB, pandas and polars read the folder directly), fixed schema, written atomically. Each trial also spills its
row to `pending/` the moment it ends, so a killed run loses at most the trials in flight: the next run with the same
run id first turns the spilled rows into a part (`recover`), then skips every (agent, suite, task, trial) that
completed.

A resumed run re-runs the trials that erred into new parts, so a trial can have several rows: every reader goes
through `load_trials`, which keeps one row per trial. Only regular files are opened (a FIFO named like a part would
block a reader forever); a file that is no trial part is an error naming it for readers, and is moved to
`quarantine/` by a resume (its trials then run again)."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import stat
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ehrbench.errors import ConfigError, MissingInputError, ResultPartError
from ehrbench.tasksets.model import taskset_of
from ehrbench.warehouse import open_duckdb

log = logging.getLogger(__name__)

TRIAL_SCHEMA = pa.schema([
    ("build_id", pa.string()), ("suite", pa.string()), ("db", pa.string()), ("task_id", pa.string()),
    ("trial", pa.int32()), ("agent", pa.string()), ("model", pa.string()),
    ("status", pa.string()),  # completed | error | invalid (the simulated user erred); only completed is scored,
    # the others are re-run on resume
    ("reward", pa.float64()), ("correct", pa.bool_()), ("is_answerable", pa.bool_()), ("abstained", pa.bool_()),
    ("answer", pa.string()), ("predicted_sql", pa.string()),
    ("retrieval_precision", pa.float64()), ("retrieval_recall", pa.float64()),
    ("retrieved_fhir_ids", pa.list_(pa.string())),  # the FHIR resources a fhir trial retrieved (scored above)
    ("dq_recall", pa.float64()), ("dq_precision", pa.float64()), ("flagged_rows_path", pa.string()),
    ("answer_judge", pa.string()),  # how a free-text answer was judged: match | llm
    ("tool_calls", pa.int32()), ("tool_errors", pa.int32()), ("stop_reason", pa.string()),
    ("user_turns", pa.int32()), ("input_tokens", pa.int64()),
    ("output_tokens", pa.int64()), ("cost_usd", pa.float64()), ("latency_s", pa.float64()), ("error", pa.string()),
    ("started_at", pa.timestamp("us", tz="UTC")), ("ended_at", pa.timestamp("us", tz="UTC")),
    ("transcript", pa.string()),  # JSON
    ("sandbox", pa.string()),  # how the agent's SQL and Python were isolated: bubblewrap, "unsafe: <why>", or null
    # (a baseline that runs no agent code)
    ("taskset", pa.string()),  # the imported task set of the task (its id is `<taskset>/<published id>`); null: a
    # generated suite's task. Derived from task_id when a row is written, so spilled rows have it too
    ("value_search", pa.string()),  # how value_similarity_search ranked: lexical | embedding, "+synonyms" with the
    # synonym table; null when the trial offered no such tool (AgentAnswer.value_search)
    ("web_search", pa.string()),  # the web_search provider offered, or disabled (AgentAnswer.web_search)
    ("protocol", pa.string()),  # the published rules the trial was scored by: ehrsql2024 | ehrsql2022 | ehrchatqa |
    # fhir_agentbench (ehrbench.scoring.protocol_of); null for dq
    # FHIR-AgentBench's own scores of a fhir trial beside ehrbench's (ehrbench.scoring.fhir_agentbench): its judge's
    # verdict and how it was reached, its retrieval precision and recall (over the gold's resource types)
    ("published_correct", pa.bool_()), ("published_judge", pa.string()),
    ("published_retrieval_precision", pa.float64()), ("published_retrieval_recall", pa.float64()),
    ("option_order", pa.string()),  # a noteqa multiple-choice trial's shown option order as the file's letters
    # ("CABED": file option C shown as A); null: the file's order (ehrbench.noteqa.options)
    ("correct_option", pa.string()),  # the letter a noteqa multiple-choice trial showed the correct option at (the
    # report's position bias: accuracy by this letter); null for other tasks
    # what the answer judges (ehrbench's, FHIR-AgentBench's, EHRNoteQA's, every vote) spent scoring the trial: the
    # evaluation's cost, kept apart from the agent's (input_tokens, output_tokens, cost_usd); null: no judge model
    ("judge_input_tokens", pa.int64()), ("judge_output_tokens", pa.int64()), ("judge_cost_usd", pa.float64()),
    # a workspace suite's trial: the folder the agent worked in (kept) and its verifier's metrics and problem (JSON)
    ("workspace_path", pa.string()), ("verifier_metrics", pa.string()),
])
# A task set's task ids hold its name (ehrbench.tasksets.model.task_id), so one key serves generated suites and task
# sets alike: unique when a run mixes them, and the resume of a run skips a task set's completed trials as any other
TRIAL_KEY = ("agent", "suite", "task_id", "trial")
REQUIRED_COLUMNS = (*TRIAL_KEY, "status")  # a part without them cannot say which trial ran or how it ended
# what a resume reads of each part: which trials completed, on which build, and which row of a trial is the latest
RESUME_COLUMNS = (*REQUIRED_COLUMNS, "build_id", "ended_at")


class ResultStore:
    def __init__(self, results_root: Path, run_id: str) -> None:
        if not run_id or "/" in run_id or run_id.startswith("."):
            raise ConfigError(f"run id {run_id!r}: expected a plain name (no '/', not starting with '.')")
        self.run_id = run_id
        self.folder = Path(results_root) / f"run_id={run_id}"

    @property
    def artifacts(self) -> Path:
        """Files a trial leaves besides its row (e.g. a data-quality submission)."""
        return self.folder / "artifacts"

    @property
    def pending(self) -> Path:
        """One-row files of trials that ended but are not in a part yet (a subfolder: readers of the parts skip it)."""
        return self.folder / "pending"

    @property
    def quarantine(self) -> Path:
        """Files a resume found among the parts or pending rows that are no trial part, kept for a person to look at."""
        return self.folder / "quarantine"

    def spill(self, row: dict) -> Path:
        """Keep one finished trial's row until its batch is written; the same trial's later row replaces it."""
        self.pending.mkdir(parents=True, exist_ok=True)
        path = self.pending / f"{_key_name(row)}.parquet"
        partial = path.with_suffix(".partial")
        pq.write_table(_table([row]), partial)
        os.replace(partial, path)
        return path

    def recover(self) -> Path | None:
        """The rows a killed run spilled, as a part (then their files go): call before `completed`. A spilled file
        that is no trial row goes to quarantine/; its trial runs again."""
        rows, read = [], []
        for file in sorted(self.pending.glob("*.parquet")):
            try:
                rows += _read_part(file).to_pylist()
            except ResultPartError as exc:
                self._set_aside(exc)
            else:
                read.append(file)
        part = self.write(rows)
        for file in read:
            file.unlink(missing_ok=True)
        return part

    def parts(self) -> list[Path]:
        return _in_write_order(self.folder.glob("part-*.parquet"))

    def builds(self) -> set[str]:
        """The builds this run's trials were made on (one, unless something went wrong)."""
        with open_duckdb() as con:
            self._load_trials(con)
            rows = con.execute("select distinct build_id from trials").fetchall()
        return {build for (build,) in rows}

    def completed(self) -> set[tuple[str, str, str, int]]:
        """(agent, suite, task id, trial) of the trials that completed in earlier batches of this run."""
        with open_duckdb() as con:
            self._load_trials(con)
            rows = con.execute(f"select {', '.join(TRIAL_KEY)} from trials where status = 'completed'").fetchall()
        return {(agent, suite, task, int(trial)) for agent, suite, task, trial in rows}

    def write(self, rows: list[dict]) -> Path | None:
        """One batch as a new part (written to a temporary name, then renamed: a reader never sees half a part)."""
        if not rows:
            return None
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"part-{self._next_part_number():05d}-{uuid.uuid4().hex[:8]}.parquet"
        partial = path.with_suffix(".partial")
        pq.write_table(_table(rows), partial)
        os.replace(partial, path)
        for row in rows:  # in the part now
            (self.pending / f"{_key_name(row)}.parquet").unlink(missing_ok=True)
        return path

    def _next_part_number(self) -> int:
        """One past the highest: the number is the parts' write order, also once a part went to quarantine/."""
        return max((_part_number(part) for part in self.parts()), default=-1) + 1

    def _load_trials(self, con: duckdb.DuckDBPyConnection) -> None:
        """`load_trials` for a resume: the columns it needs, and a part that is no trial part set aside, not an error
        (its trials count as not run, so they run again)."""
        tables = []
        for part in self.parts():
            try:
                tables.append(_read_part(part, RESUME_COLUMNS))
            except ResultPartError as exc:
                self._set_aside(exc)
        _create_trials_table(con, tables, RESUME_COLUMNS)

    def _set_aside(self, error: ResultPartError) -> None:
        self.quarantine.mkdir(parents=True, exist_ok=True)
        target = self.quarantine / error.path.name
        if os.path.lexists(target):  # the same name set aside before
            target = target.with_name(f"{target.name}.{uuid.uuid4().hex[:8]}")
        try:
            os.replace(error.path, target)  # moves the entry itself: a FIFO is not opened, a symlink not followed
        except FileNotFoundError:  # gone meanwhile: nothing to keep
            return
        log.warning("%s: %s; moved to %s, its trials run again", error.path, error.problem, target)


def run_parts(run_folder: Path) -> list[Path]:
    """The parts of a run folder, for readers; a folder without any is an error naming it."""
    parts = _in_write_order(Path(run_folder).glob("part-*.parquet"))
    if not parts:
        raise MissingInputError(f"{run_folder}: no results (part-*.parquet); run `ehrbench evaluate` first")
    return parts


def readable_parts(run_folder: Path) -> list[Path]:
    """`run_parts`, each checked to be a regular parquet file with the trial key (only its footer is read): a
    ResultPartError names the first that is not."""
    parts = run_parts(run_folder)
    for part in parts:
        with _open_regular(part) as file:
            _check_columns(part, _parquet_file(part, file).schema_arrow)
    return parts


def load_trials(con: duckdb.DuckDBPyConnection, run_folder: Path) -> None:
    """The run's trials as the temp table `trials` of `con` (TRIAL_SCHEMA's columns), one row per trial
    (TRIAL_KEY): its latest completed row, else its latest row (so a trial that never completed shows its error).
    A resumed run re-runs failed trials into new parts, so a trial can have several rows; the metric table, the
    report and the run comparison all read this table, so each trial counts once. FileNotFoundError: no parts;
    ResultPartError (naming the file and what was expected): a part that is no regular parquet file with the trial
    key columns."""
    _create_trials_table(con, [_read_part(part) for part in run_parts(run_folder)])


# Latest: ordered by ended_at, then the part's write order and the row's place in it (ended_at is null in rows of
# hand-made parts; a row with a time is later than one without).
_ONE_ROW_PER_TRIAL = f"""
create or replace temp table trials as
select * exclude (_part_order, _row_order) from _trial_rows
qualify row_number() over (
    partition by {", ".join(TRIAL_KEY)}
    order by coalesce(status = 'completed', false) desc, ended_at desc nulls last, _part_order desc, _row_order desc
) = 1
order by _part_order, _row_order
"""


def _create_trials_table(con: duckdb.DuckDBPyConnection, tables: list[pa.Table],
                         columns: Sequence[str] = TRIAL_SCHEMA.names) -> None:
    """`trials` from the parts' rows (`tables`, each in `columns` of TRIAL_SCHEMA, in write order)."""
    schema = _schema_of(columns)
    rows = pa.concat_tables([_with_write_order(schema.empty_table(), -1),
                             *(_with_write_order(table, order) for order, table in enumerate(tables))])
    con.register("_trial_rows", rows)
    try:
        con.execute(_ONE_ROW_PER_TRIAL)
    finally:
        con.unregister("_trial_rows")


def _with_write_order(table: pa.Table, part_order: int) -> pa.Table:
    return (table.append_column("_part_order", pa.array([part_order] * table.num_rows, pa.int32()))
            .append_column("_row_order", pa.array(range(table.num_rows), pa.int64())))


def _read_part(path: Path, columns: Sequence[str] = TRIAL_SCHEMA.names) -> pa.Table:
    """A part's rows in TRIAL_SCHEMA's types, its `columns` only (those the part predates are null). Only a regular
    file is opened; anything else, or a file that is no trial part, is a ResultPartError naming it."""
    with _open_regular(path) as file:
        parquet = _parquet_file(path, file)
        _check_columns(path, parquet.schema_arrow)
        try:
            table = parquet.read(columns=[c for c in columns if c in parquet.schema_arrow.names])
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise ResultPartError(path, f"unreadable parquet data ({_first_line(exc)})") from exc
    return _conformed(path, table, _schema_of(columns))


@contextmanager
def _open_regular(path: Path) -> Iterator[BinaryIO]:
    """`path` opened for reading if it is a regular file; anything else is refused before it is opened: reading a
    FIFO blocks until someone writes to it, a symlink may point anywhere, a directory is no part."""
    try:
        _require_regular(path, os.lstat(path).st_mode)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # never blocks, never follows
    except FileNotFoundError as exc:
        raise ResultPartError(path, "vanished while it was being read") from exc
    except PermissionError as exc:
        raise ResultPartError(path, f"cannot be read ({exc.strerror})") from exc
    with os.fdopen(fd, "rb") as file:
        _require_regular(path, os.fstat(fd).st_mode)  # the same check on what was opened: it may have been swapped
        yield file


_NOT_REGULAR = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
                (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _require_regular(path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for is_kind, name in _NOT_REGULAR if is_kind(mode)), "a special file")
        raise ResultPartError(path, f"{kind}, not a regular file; expected a parquet part written by ehrbench")


def _parquet_file(path: Path, file: BinaryIO) -> pq.ParquetFile:
    if os.fstat(file.fileno()).st_size == 0:
        raise ResultPartError(path, "an empty file (0 bytes), not a parquet part (a write that never finished?)")
    try:
        return pq.ParquetFile(file)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ResultPartError(path, "not a parquet file (truncated or foreign)") from exc


def _check_columns(path: Path, schema: pa.Schema) -> None:
    """The trial key and status must be there; any column of TRIAL_SCHEMA that is there must hold its kind of
    value. Columns added to TRIAL_SCHEMA after a part was written may be missing (they read as null)."""
    missing = [name for name in REQUIRED_COLUMNS if name not in schema.names]
    if missing:
        raise ResultPartError(path, f"not a trial part: no column {', '.join(missing)}; expected the columns "
                                    f"{', '.join(REQUIRED_COLUMNS)} and others of TRIAL_SCHEMA")
    for expected in TRIAL_SCHEMA:
        found = [schema.field(i) for i in schema.get_all_field_indices(expected.name)]
        if len(found) > 1:
            raise ResultPartError(path, f"column {expected.name} appears {len(found)} times; expected once")
        if found and not _fits(found[0].type, expected):
            raise ResultPartError(path, f"column {expected.name} holds {found[0].type}; expected "
                                        f"{_kind(expected.type)} ({expected.type})")


def _fits(found: pa.DataType, expected: pa.Field) -> bool:
    """Readable as `expected`: the same kind (string and large_string alike), integers where numbers are expected,
    or a column of nulls only (a writer that never had a value) where the column may be null."""
    kind, wanted = _kind(found), _kind(expected.type)
    return (kind == wanted or (kind, wanted) == ("integer", "number")
            or (kind == "null" and expected.name not in REQUIRED_COLUMNS))


def _kind(data_type: pa.DataType) -> str:
    types = pa.types
    if types.is_string(data_type) or types.is_large_string(data_type) or types.is_string_view(data_type):
        return "text"
    if types.is_list(data_type) or types.is_large_list(data_type):
        return f"list of {_kind(data_type.value_type)}"
    checks = (("integer", types.is_integer), ("number", types.is_floating), ("boolean", types.is_boolean),
              ("timestamp", types.is_timestamp), ("null", types.is_null))
    return next((kind for kind, is_kind in checks if is_kind(data_type)), str(data_type))


def _conformed(path: Path, table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` in `schema`'s columns and types; a column it lacks is null."""
    columns = []
    for field in schema:
        if field.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        try:  # timestamps may lose sub-microsecond digits; any other value must fit exactly
            columns.append(table[field.name].cast(field.type, safe=not pa.types.is_timestamp(field.type)))
        except (pa.ArrowException, ValueError) as exc:
            raise ResultPartError(path, f"column {field.name} holds values that do not fit {field.type} "
                                        f"({_first_line(exc)})") from exc
    return pa.Table.from_arrays(columns, schema=schema)


def _schema_of(columns: Sequence[str]) -> pa.Schema:
    return pa.schema([TRIAL_SCHEMA.field(name) for name in columns])


def _part_number(path: Path) -> int:
    """The NNNNN of part-NNNNN-<hex>.parquet (-1 for a part named otherwise: before every numbered one)."""
    match = re.match(r"part-(\d+)-", path.name)
    return int(match.group(1)) if match else -1


def _in_write_order(parts: Iterable[Path]) -> list[Path]:
    """By part number, numerically (part-100000 follows part-99999), then name."""
    return sorted(parts, key=lambda part: (_part_number(part), part.name))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{name: row.get(name) for name in TRIAL_SCHEMA.names}
                                 | {"taskset": row.get("taskset") or taskset_of(str(row.get("task_id") or ""))}
                                 for row in rows], schema=TRIAL_SCHEMA)


def _key_name(row: dict) -> str:
    """A file name for a trial's key (agent names hold '/' and ':')."""
    return hashlib.sha1(repr(tuple(row[k] for k in TRIAL_KEY)).encode()).hexdigest()[:20]
