"""The metric table of a run that evaluated task sets: one row per (agent, suite, task set), so an imported
benchmark's scores never mix with the generated suite its tasks run in (a task set's `ehrsql` tasks and the build's
own `ehrsql` questions get an RS(10) each). A run without task sets gets `ehrbench.evaluation.report.metric_table`'s
rows unchanged; with them, every row has a `taskset` (null: the build's generated suites) after its suite.

Each group's trials are the run's (`load_trials`: one row per trial) with that `taskset` value, scored by
`metric_table` itself, so the definitions stay in one place."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from ehrbench.evaluation import report
from ehrbench.evaluation.results import load_trials
from ehrbench.warehouse import open_duckdb


def metric_table_by_taskset(run_folder: Path) -> list[dict]:
    """`metric_table`'s rows (its errors too), one per (agent, suite, task set) when the run evaluated task sets."""
    table = report.metric_table(run_folder)
    with open_duckdb() as con:
        load_trials(con, run_folder)
        groups = [name for (name,) in con.execute(
            "select distinct taskset from trials order by taskset nulls first").fetchall()]
        if groups in ([], [None]):
            return table
        rows: list[dict] = []
        with tempfile.TemporaryDirectory(prefix="ehrbench-taskset-metrics-") as scratch:
            for number, name in enumerate(groups):
                folder = Path(scratch) / f"group-{number}"
                folder.mkdir()
                trials = con.execute("select * from trials where taskset is not distinct from ?",
                                     [name]).to_arrow_table()
                pq.write_table(trials, folder / "part-00000-group.parquet")
                rows += [_with_taskset(row, name) for row in report.metric_table(folder)]
    return rows


def _with_taskset(row: dict, taskset: str | None) -> dict:
    keys = list(row)
    at = keys.index("suite") + 1 if "suite" in keys else 0
    return dict([*list(row.items())[:at], ("taskset", taskset), *list(row.items())[at:]])
