"""Trial results as parquet: one part per finished batch under `<results>/run_id=<id>/` (hive-partitioned, so
DuckDB, pandas and polars read the folder directly), fixed schema, written atomically. Each trial also spills its
row to `pending/` the moment it ends, so a killed run loses at most the trials in flight: the next run with the same
run id first turns the spilled rows into a part (`recover`), then skips every (agent, suite, task, trial) that
completed."""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

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
])
TRIAL_KEY = ("agent", "suite", "task_id", "trial")


class ResultStore:
    def __init__(self, results_root: Path, run_id: str) -> None:
        if not run_id or "/" in run_id or run_id.startswith("."):
            raise ValueError(f"run id {run_id!r}: expected a plain name (no '/', not starting with '.')")
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

    def spill(self, row: dict) -> Path:
        """Keep one finished trial's row until its batch is written; the same trial's later row replaces it."""
        self.pending.mkdir(parents=True, exist_ok=True)
        path = self.pending / f"{_key_name(row)}.parquet"
        partial = path.with_suffix(".partial")
        pq.write_table(_table([row]), partial)
        os.replace(partial, path)
        return path

    def recover(self) -> Path | None:
        """The rows a killed run spilled, as a part (then their files go): call before `completed`."""
        files = sorted(self.pending.glob("*.parquet"))
        if not files:
            return None
        part = self.write(pq.read_table(files).to_pylist())
        for file in files:
            file.unlink(missing_ok=True)
        return part

    def parts(self) -> list[Path]:
        return sorted(self.folder.glob("part-*.parquet"))

    def builds(self) -> set[str]:
        """The builds this run's trials were made on (one, unless something went wrong)."""
        if not self.parts():
            return set()
        with duckdb.connect() as con:
            rows = con.execute("select distinct build_id from read_parquet(?, union_by_name = true)",
                               [[str(p) for p in self.parts()]]).fetchall()
        return {build for (build,) in rows}

    def completed(self) -> set[tuple[str, str, str, int]]:
        """(agent, suite, task id, trial) of the trials that completed in earlier batches of this run."""
        if not self.parts():
            return set()
        with duckdb.connect() as con:
            rows = con.execute(f"select distinct {', '.join(TRIAL_KEY)} from read_parquet(?, union_by_name = true) "
                               "where status = 'completed'", [[str(p) for p in self.parts()]]).fetchall()
        return {(agent, suite, task, int(trial)) for agent, suite, task, trial in rows}

    def write(self, rows: list[dict]) -> Path | None:
        """One batch as a new part (written to a temporary name, then renamed: a reader never sees half a part)."""
        if not rows:
            return None
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"part-{len(self.parts()):05d}-{uuid.uuid4().hex[:8]}.parquet"
        partial = path.with_suffix(".partial")
        pq.write_table(_table(rows), partial)
        os.replace(partial, path)
        for row in rows:  # in the part now
            (self.pending / f"{_key_name(row)}.parquet").unlink(missing_ok=True)
        return path


def run_parts(run_folder: Path) -> list[Path]:
    """The parts of a run folder, for readers; a folder without any is an error naming it."""
    parts = sorted(Path(run_folder).glob("part-*.parquet"))
    if not parts:
        raise FileNotFoundError(f"{run_folder}: no results (part-*.parquet); run `ehrbench evaluate` first")
    return parts


def _table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{name: row.get(name) for name in TRIAL_SCHEMA.names} for row in rows],
                                schema=TRIAL_SCHEMA)


def _key_name(row: dict) -> str:
    """A file name for a trial's key (agent names hold '/' and ':')."""
    return hashlib.sha1(repr(tuple(row[k] for k in TRIAL_KEY)).encode()).hexdigest()[:20]
