"""The verifier of the MEDS conversion tasks (docs/benchmarks.md#meds-conversion-tasks): the MEDS data an agent left in
its workspace (`meds/data/*.parquet`) against the task's gold events.

Pass = every shard conforms to the `meds` package's DataSchema and is in MEDS order (subject, then time with static
events first), and the events, as a multiset of (subject_id, time, code, numeric_value, text_value), equal the gold's:
the same content hash. The metrics say where they differ: events missing and extra, in all and per code prefix (a
code's first `//` part), and whether the prefixes the task's customisations touch and those it left at the standard
mapping are right.
"""

from __future__ import annotations

import json
from pathlib import Path

import meds
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ehrbench.errors import ValidationError
from ehrbench.layout import WorkspaceTaskLayout
from ehrbench.meds.export import check_table
from ehrbench.tasks import Verdict
from ehrbench.warehouse import open_duckdb

OUTPUT_DIR = "meds"  # the instruction asks for <workspace>/meds/data/*.parquet
CORE_COLUMNS = ("subject_id", "time", "code", "numeric_value", "text_value")
EVENT_SCHEMA = pa.schema([("subject_id", pa.int64()), ("time", pa.timestamp("us")), ("code", pa.large_string()),
                          ("numeric_value", pa.float32()), ("text_value", pa.large_string())])
MAX_SHARD_BYTES = 2 << 30  # a larger file is refused unread
PREFIX = "split_part(code, '//', 1)"
# one canonical line per event: row order and float formatting cannot change the hash
_LINE = ("to_json(struct_pack(s := subject_id, t := strftime(time, '%Y-%m-%dT%H:%M:%S.%f'), c := code, "
         "n := numeric_value, x := text_value))")


def summarise_events(events: Path | pa.Table) -> dict:
    """Events, subjects, per-prefix counts and the content hash of MEDS events (a parquet file or a table)."""
    with open_duckdb() as con:
        con.register("events", pq.read_table(events, columns=list(CORE_COLUMNS)) if isinstance(events, Path)
                     else events.select(list(CORE_COLUMNS)))
        count, subjects = con.execute("select count(*), count(distinct subject_id) from events").fetchone()
        prefixes = dict(con.execute(f"select {PREFIX}, count(*) from events group by 1 order by 1").fetchall())
        digest = con.execute(f"select sha256(coalesce(string_agg(line, chr(10) order by line), '')) from "
                             f"(select {_LINE} as line from events)").fetchone()[0]
    return {"events": count, "subjects": subjects, "prefixes": prefixes, "content_sha256": digest}


def gold_events_path(task: WorkspaceTaskLayout) -> Path:
    return task.gold / "events.parquet"


def read_gold_events(task: WorkspaceTaskLayout) -> pa.Table:
    return pq.read_table(gold_events_path(task), columns=list(CORE_COLUMNS)).cast(EVENT_SCHEMA)


def read_agent_events(workspace: Path) -> tuple[pa.Table | None, int, str | None]:
    """The agent's events (CORE_COLUMNS; text_value null when it wrote none), its shard count, and why they
    cannot be scored (None when they can)."""
    data = workspace / OUTPUT_DIR / meds.data_subdirectory
    shards = sorted(data.rglob("*.parquet")) if data.is_dir() and not data.is_symlink() else []
    if not shards:
        return None, 0, f"no MEDS data shards: expected {OUTPUT_DIR}/data/*.parquet in the workspace"
    tables = []
    for shard in shards:
        name = shard.relative_to(workspace)
        if shard.is_symlink() or not shard.is_file():
            return None, len(shards), f"{name}: not a regular file (a symbolic link is refused unread)"
        if shard.stat().st_size > MAX_SHARD_BYTES:
            return None, len(shards), f"{name}: larger than {MAX_SHARD_BYTES >> 30} GiB"
        try:
            table = pq.read_table(shard)
            kind = _kind_problem(table)
            if kind:
                return None, len(shards), f"{name}: does not conform to meds.DataSchema ({kind})"
            table = check_table(meds.DataSchema, table, name)
        except ValidationError as exc:
            return None, len(shards), str(exc)
        except (pa.ArrowException, OSError) as exc:
            return None, len(shards), f"{name}: not a readable parquet file ({exc})"
        problem = _order_problem(table)
        if problem:
            return None, len(shards), f"{name}: {problem}"
        if "text_value" not in table.column_names:
            table = table.append_column("text_value", pa.nulls(table.num_rows, pa.large_string()))
        tables.append(table.select(list(CORE_COLUMNS)).cast(EVENT_SCHEMA))
    return pa.concat_tables(tables), len(shards), None


# the type family each column must have; within it, meds.DataSchema.align casts (string to large_string, a
# timestamp's unit, float64 to float32), as the meds package reads data
_KINDS = {"subject_id": (pa.types.is_integer, "an integer"), "time": (pa.types.is_timestamp, "a timestamp"),
          "code": (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "a string"),
          "numeric_value": (pa.types.is_floating, "a float"),
          "text_value": (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t),
                         "a string")}


def _kind_problem(table: pa.Table) -> str | None:
    problems = [f"{column} is {table.schema.field(column).type}, expected {wanted}"
                for column, (accepts, wanted) in _KINDS.items()
                if column in table.column_names and not accepts(table.schema.field(column).type)]
    return "; ".join(problems) or None


def _order_problem(table: pa.Table) -> str | None:
    """MEDS order within a shard: subject_id ascending, then time ascending with static (null-time) events first."""
    if table.num_rows < 2:
        return None
    subjects = table.column("subject_id").to_numpy()
    times = pc.fill_null(table.column("time").cast(pa.int64()), np.iinfo(np.int64).min).to_numpy()
    same = subjects[1:] == subjects[:-1]
    bad = np.flatnonzero((subjects[1:] < subjects[:-1]) | (same & (times[1:] < times[:-1])))
    if bad.size:
        return (f"not in MEDS order (subject_id, then time with static events first): row {int(bad[0]) + 1} "
                f"comes before row {int(bad[0])} (0-based rows)")
    return None


def verify_conversion(task_dir: Path, workspace: Path) -> Verdict:
    task = WorkspaceTaskLayout(task_dir)
    spec = json.loads(task.task_json.read_text(encoding="utf-8"))
    expected = spec["expected"]
    touched = {p for c in spec["customisations"] for p in c["prefixes"]}
    metrics = {"events_expected": expected["events"], "expected_sha256": expected["content_sha256"]}
    events, shards, problem = read_agent_events(workspace)
    metrics["shards"] = shards
    if events is None:
        return Verdict(False, 0.0, {**metrics, "schema_ok": False}, problem)
    found = summarise_events(events)
    with open_duckdb() as con:
        con.register("agent", events)
        con.register("gold", read_gold_events(task))
        differing = dict(con.execute(
            f"select {PREFIX}, count(*) from ((select * from gold except all select * from agent) union all "
            f"(select * from agent except all select * from gold)) group by 1 order by 1").fetchall())
        missing = con.execute("select count(*) from (select * from gold except all select * from agent)").fetchone()[0]
    extra = found["events"] - expected["events"] + missing
    metrics.update(
        schema_ok=True, events_found=found["events"], events_missing=missing, events_extra=extra,
        found_sha256=found["content_sha256"],
        prefixes_missing=sorted(set(expected["prefixes"]) - set(found["prefixes"])),
        prefixes_unexpected=sorted(set(found["prefixes"]) - set(expected["prefixes"])),
        prefixes_differing=differing,
        customised_prefixes_right=not (set(differing) & touched),
        standard_prefixes_right=not (set(differing) - touched))
    passed = found["content_sha256"] == expected["content_sha256"] and not missing and not extra
    problem = None if passed else (f"{missing} expected event(s) missing and {extra} unexpected; differing code "
                                   f"prefixes: {', '.join(differing) or 'none'}")
    return Verdict(passed, 1.0 if passed else 0.0, metrics, problem)
