"""Run the dbt project (dbt owns the SQL transformations) on the warehouse file.

dbt is invoked in-process with dbtRunner, one run at a time, in the warehouse's folder: the warehouse reaches
profiles.yml as a file name through EHRBENCH_WAREHOUSE (see `_dbt_environment`); target/ goes under the data
directory. dbt prints nothing: its log (a line per node) goes to `<log_dir>/dbt.log` — a build passes its own log
folder — and only its warnings and errors reach the caller (`on_log`), which logs one summary line per run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb
import yaml

from ehrbench.dbt_parse_cache import keep_parse, parse_key, restore_parse
from ehrbench.environment import environment
from ehrbench.errors import TransformError
from ehrbench.warehouse import duckdb_memory_limit, open_duckdb

PROJECT_DIR = Path(__file__).resolve().parents[2] / "dbt_project"
# dbt builds two models at a time (`--threads 2`; DuckDB takes concurrent writers within one process) while the raw
# tables are small. DuckDB parallelises a statement by the row groups (122,880 rows) of the table it scans and writes
# a new table's last partial row group at commit, on one core: a model over a table of a few row groups leaves a core
# idle for much of its statement, and dbt's own Python work per node (~30 ms) adds to it. Two threads overlap them:
# the demos (2.5 M rows) profiles run 15 s instead of 19; the MIMIC-IV demo x10 (10.9 M) EHRSQL-aligned FHIR models
# 3.5-4.4 s instead of 4.3-4.4 (1.7 GiB instead of 1.0), mimic_iv_on_fhir's 19.0-20.4 s instead of 22.2-22.9
# (4.0 GiB instead of 2.8). On larger data one at a time: each statement uses every core, and a second one beside it
# would hold its own memory (at x100, 106 M rows, the build's peak is dbt's second run).
PARALLEL_MODELS_UP_TO_RAW_ROWS = 20_000_000


def staging_selection(datasets: Sequence[str] = ("mimic_iv", "eicu")) -> list[str]:
    """dbt selectors of the staging models of `datasets` (models/staging/<dataset>/); MIMIC-IV-Note's are staged only
    when a build ingested it."""
    return [f"staging.{dataset}" for dataset in datasets]


@dataclass(frozen=True)
class NodeResult:
    unique_id: str
    resource_type: str
    status: str
    seconds: float
    message: str | None
    # when dbt began compiling the node and ended running it (UTC), if it got that far
    started: datetime | None = None
    ended: datetime | None = None


@dataclass(frozen=True)
class DbtRun:
    command: tuple[str, ...]
    nodes: tuple[NodeResult, ...]

    @property
    def span_seconds(self) -> float:
        """Seconds from the first node's start to the last node's end: the nodes' time when dbt runs two at a time
        (their own seconds then overlap), excluding dbt's start-up and parse."""
        started = [node.started for node in self.nodes if node.started]
        ended = [node.ended for node in self.nodes if node.ended]
        return (max(ended) - min(started)).total_seconds() if started and ended else 0.0

    def count(self, status: str) -> int:
        return sum(1 for node in self.nodes if node.status == status)

    @property
    def summary(self) -> dict[str, int]:
        statuses = sorted({node.status for node in self.nodes})
        return {status: self.count(status) for status in statuses}

    @property
    def outcomes(self) -> dict[str, int]:
        """Node counts a person reads: models' `success` and tests' `pass` are both "ok"."""
        counts: dict[str, int] = {}
        for node in self.nodes:
            outcome = "ok" if node.status in ("success", "pass") else node.status
            counts[outcome] = counts.get(outcome, 0) + 1
        return dict(sorted(counts.items()))

    def describe(self) -> str:
        """One line for a person, e.g. "dbt build --select staging: 192 nodes (191 ok, 1 warn) in 21.4 s"."""
        counts = ", ".join(f"{n} {outcome}" for outcome, n in self.outcomes.items())
        seconds = sum(node.seconds for node in self.nodes)
        return f"dbt {' '.join(self.command)}: {len(self.nodes)} nodes ({counts or 'none'}) in {seconds:.1f} s"

    def warnings(self) -> list[str]:
        """One line per node that warned (dbt's own warning spans three log lines)."""
        # unique ids read <resource type>.<package>.<name>[.<hash>]
        return [f"dbt {node.resource_type} {node.unique_id.split('.')[2]} warned: {node.message}"
                for node in self.nodes if node.status == "warn"]


def _release_warehouse() -> None:
    """dbt-duckdb keeps its DuckDB instance open in-process after a run; close it so that later
    readers (GX, read-only connections) can open the file with their own configuration."""
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager
    from dbt.adapters.factory import reset_adapters

    reset_adapters()
    DuckDBConnectionManager.close_all_connections()


# dbt's in-process runner is not thread-safe (one adapter registry per process), and a run changes the directory
_ONE_RUN_AT_A_TIME = threading.Lock()


@contextmanager
def _dbt_environment(warehouse: Path) -> Iterator[None]:
    """The warehouse reaches profiles.yml by its file name, dbt running in its folder: dbt keys its saved parse on the
    profile's values, so an absolute path would cost every new data directory a full parse (ehrbench.dbt_parse_cache).
    """
    values = {"EHRBENCH_WAREHOUSE": warehouse.name, "EHRBENCH_DUCKDB_MEMORY_LIMIT": duckdb_memory_limit(),
              "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1"}
    saved, cwd = {key: os.environ.get(key) for key in values}, os.getcwd()
    with _ONE_RUN_AT_A_TIME:
        os.environ.update(values)
        os.chdir(warehouse.resolve().parent)
        try:
            yield
        finally:
            os.chdir(cwd)
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def run_dbt(command: Sequence[str], *, warehouse: Path, work_dir: Path, vars: dict | None = None,
            project_dir: Path = PROJECT_DIR, log_dir: Path | None = None,
            on_log: Callable[[str], None] | None = None) -> DbtRun:
    """Run one dbt command (e.g. ["build", "--select", "staging.mimic_iv"]); raise TransformError on failure.

    dbt's log is appended to `<log_dir>/dbt.log` (default `<work_dir>/logs/`); `on_log` gets its warnings and errors.
    A work folder without dbt's parse of the project starts from the one kept in the user's cache folder
    (ehrbench.dbt_parse_cache; $EHRBENCH_CACHE_DIR).
    """
    from dbt.cli.main import dbtRunner  # imported late: dbt's import is slow and not always needed

    def forward(event) -> None:
        if on_log and event.info.level in ("warn", "error") and event.info.msg:
            on_log(str(event.info.msg))

    work_dir = work_dir.resolve()  # dbt resolves relative paths against the project, not the caller's directory
    log_dir = (log_dir or work_dir / "logs").resolve()
    args = [*command, "--project-dir", str(project_dir), "--profiles-dir", str(project_dir),
            "--target-path", str(work_dir / "target"), "--log-path", str(log_dir),
            "--log-level", "none", "--log-level-file", "info", "--no-use-colors", "--no-use-colors-file",
            # no target/manifest.json nor run_results.json: the results are read here, in-process, and dbt.log has the
            # run; writing them took ~0.5 s of every command (the partial parse, partial_parse.msgpack, is kept)
            "--no-write-json", "--threads", str(dbt_threads(warehouse))]
    if vars:
        import json

        args += ["--vars", json.dumps(vars)]
    parse_cache, target = environment().user_cache_dir() / "dbt-parse", work_dir / "target"
    key = parse_key(project_dir, warehouse, vars)
    restore_parse(parse_cache, key, target)
    with _dbt_environment(warehouse):
        try:
            outcome = dbtRunner(callbacks=[forward]).invoke(args)
        finally:
            _release_warehouse()
    keep_parse(parse_cache, key, target)

    nodes: tuple[NodeResult, ...] = ()
    result = outcome.result
    if result is not None and hasattr(result, "results"):
        nodes = tuple(
            NodeResult(r.node.unique_id, r.node.resource_type, str(r.status), float(r.execution_time or 0),
                       _failing_column_checks(warehouse, r) or r.message,
                       min((t.started_at for t in r.timing if t.started_at), default=None),
                       max((t.completed_at for t in r.timing if t.completed_at), default=None))
            for r in result.results)
    run = DbtRun(tuple(command), nodes)
    if outcome.exception is not None:
        raise TransformError(f"dbt {' '.join(command)} failed: {outcome.exception}") from None
    if not outcome.success:
        failed = [n for n in nodes if n.status in ("error", "fail", "runtime error")]
        detail = "; ".join(f"{n.unique_id}: {n.message}" for n in failed[:5]) or "see dbt log"
        raise TransformError(f"dbt {' '.join(command)} failed ({len(failed)} node(s)): {detail}")
    return run


def dbt_threads(warehouse: Path) -> int:
    """How many models dbt builds at a time on `warehouse`: see PARALLEL_MODELS_UP_TO_RAW_ROWS."""
    if not warehouse.exists():
        return 1
    try:
        with open_duckdb(str(warehouse), read_only=True) as con:  # closed before dbt opens it to write
            (raw_rows,) = con.execute("select coalesce(sum(estimated_size), 0) from duckdb_tables() "
                                      "where starts_with(schema_name, 'raw_')").fetchone()
    except duckdb.Error:  # held by another process, say: dbt's own attempt reports it in its words
        return 1
    return 2 if raw_rows <= PARALLEL_MODELS_UP_TO_RAW_ROWS else 1


def _failing_column_checks(warehouse: Path, result) -> str | None:
    """What a failed or warned `column_checks` test found, e.g. "not_empty: 1, unique on subject_id: 1, not_null on
    dod: 3" (its rows name the failing tests; dbt's own message only counts them)."""
    node = result.node
    if str(result.status) not in ("fail", "warn") or not getattr(node, "test_metadata", None) \
            or node.test_metadata.name != "column_checks" or not node.compiled_code:
        return None

    with open_duckdb(str(warehouse), read_only=True) as con:
        for alias, path in attached_databases(warehouse).items():  # a test of a model built into one of them
            if path.is_file():
                con.execute(f"attach '{path}' as {alias} (read_only)")
        rows = con.execute(node.compiled_code).fetchall()
    return ", ".join(f"{test} on {column}: {failing}" if column else f"{test}: {failing}"
                     for test, column, failing in rows)


def attached_databases(warehouse: Path, project_dir: Path = PROJECT_DIR) -> dict[str, Path]:
    """The databases dbt attaches beside the warehouse (profiles.yml's `attach`: models configured with
    `+database: <alias>` are built into them): alias -> file."""
    profile = yaml.safe_load((project_dir / "profiles.yml").read_text(encoding="utf-8"))
    target = profile["ehrbench"]["outputs"][profile["ehrbench"]["target"]]
    return {entry["alias"]: warehouse.parent / entry["path"] for entry in target.get("attach", [])}
