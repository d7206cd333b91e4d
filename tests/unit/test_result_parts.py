"""A run's parquet parts as every reader sees them (`ehrbench.evaluation.results.load_trials`): one row per trial
after a resume re-ran the trials that erred, in the metric table, the report and the run comparison alike; parts
written before newer columns existed, or by another writer with compatible types, still read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ehrbench.evaluation.report import metric_table
from ehrbench.evaluation.results import TRIAL_SCHEMA, ResultStore, load_trials, run_parts
from ehrbench.reports import aggregates
from ehrbench.reports.assemble import open_run, report_data
from ehrbench.reports.compare import compare_runs
from ehrbench.reports.model import Bootstrap

NO_CI = Bootstrap(replicates=0, seed=0, level=0.95)
FIRST_RUN = datetime(2026, 11, 20, 2, 0, tzinfo=UTC)
RESUME = FIRST_RUN + timedelta(hours=1)


def _trial(task: str, trial: int, status: str, reward: float | None, ended_at: datetime | None = None,
           agent: str = "a") -> dict:
    return dict(build_id="b1", suite="ehrsql", db="mimic_iv", task_id=task, trial=trial, agent=agent, status=status,
                reward=reward, correct=reward == 1.0 if status == "completed" else None, is_answerable=True,
                abstained=False, latency_s=1.0, cost_usd=0.01, started_at=ended_at, ended_at=ended_at,
                error="TimeoutError: endpoint did not answer" if status == "error" else None)


def _resumed_run(results: Path, run_id: str = "n-20261121T020000Z") -> ResultStore:
    """Five tasks × two trials. The first run (part 0) ends with errors and an invalid trial; the resume (part 1)
    re-runs exactly those, one of them erring again."""
    store = ResultStore(results, run_id)
    first = [("q0", 0, "completed", 1.0), ("q0", 1, "completed", 1.0),
             ("q1", 0, "completed", 1.0), ("q1", 1, "error", 0.0),
             ("q2", 0, "error", 0.0), ("q2", 1, "error", 0.0),
             ("q3", 0, "completed", 0.0), ("q3", 1, "completed", 0.0),
             ("q4", 0, "error", 0.0), ("q4", 1, "invalid", None)]
    store.write([_trial(*row, ended_at=FIRST_RUN + timedelta(minutes=n)) for n, row in enumerate(first)])
    assert store.completed() == {("a", "ehrsql", task, trial) for task, trial, status, _ in first
                                 if status == "completed"}
    again = [("q1", 1, "completed", 1.0), ("q2", 0, "completed", 1.0), ("q2", 1, "error", 0.0),
             ("q4", 0, "completed", 0.0), ("q4", 1, "completed", 1.0)]
    store.write([_trial(*row, ended_at=RESUME + timedelta(minutes=n)) for n, row in enumerate(again)])
    return store


# After the resume each trial's row is its latest completed one, else its latest:
#   q0: 1, 1   q1: 1, 1 (re-run)   q2: 1 (re-run), error 0 (erred twice: still an error)   q3: 0, 0
#   q4: 0, 1 (both re-run; the invalid row no longer counts)
# 10 scored trials, 1 error, 0 invalid, k = 2 trials per task (the fewest any task has).
# Success rate = successes / scored trials = (2 + 2 + 1 + 0 + 1) / 10 = 0.6.
# Pass@2 = tasks with a success in their 2 trials / tasks = 4 / 5 (q0, q1, q2, q4);
# Pass^2 = tasks with 2 successes of 2 / tasks = 2 / 5 (q0, q1).
# Counting every row instead (the bug): 15 rows, 14 scored, SR 6 / 14, 5 errors.
EXPECTED = {"tasks": 5, "trials": 10, "k": 2, "errors": 1, "invalid": 0, "success_rate": 0.6, "pass@2": 0.8,
            "pass^2": 0.4}


def test_the_metric_table_counts_each_trial_of_a_resumed_run_once(tmp_path):
    (row,) = metric_table(_resumed_run(tmp_path).folder)
    assert {key: row[key] for key in EXPECTED} == pytest.approx(EXPECTED)
    # the cost of the 10 trials that count (each 0.01), not of the 15 rows
    assert row["cost_usd"] == pytest.approx(0.10)


def test_the_report_counts_each_trial_of_a_resumed_run_once(tmp_path):
    store = _resumed_run(tmp_path)
    with open_run(store.folder) as con:
        (row,) = aggregates.leaderboard(con, NO_CI)["ehrsql"]
    assert (row.tasks, row.trials, row.k, row.errors, row.invalid) == (5, 10, 2, 1, 0)
    assert row.values["success_rate"].value == pytest.approx(0.6)
    assert (row.values["pass_at_k"].value, row.values["pass_hat_k"].value) == pytest.approx((0.8, 0.4))
    assert row.failing_tasks == 3  # q2, q3, q4: not solved in every trial
    data = report_data(tmp_path, store.run_id, tmp_path / "no-build", bootstrap=NO_CI)
    shown = {task.task_id: [(t.trial, t.status, t.reward) for t in task.trials] for task in data.tasks}
    assert shown["q1"] == [(0, "completed", 1.0), (1, "completed", 1.0)]  # the re-run, not the error it replaced
    assert shown["q2"] == [(0, "completed", 1.0), (1, "error", 0.0)]
    assert shown["q4"] == [(0, "completed", 0.0), (1, "completed", 1.0)]


def test_the_comparison_counts_each_trial_of_a_resumed_run_once(tmp_path):
    previous = ResultStore(tmp_path, "n-20261120T020000Z")
    previous.write([_trial(f"q{t}", k, "completed", 1.0, FIRST_RUN - timedelta(days=1)) for t in range(5)
                    for k in range(2)])
    current = _resumed_run(tmp_path)
    comparison = compare_runs(current.folder, previous.folder, NO_CI)
    # solved in every trial before; now mean rewards q1 (1 + 1) / 2 = 1 (not (1 + 0 + 1) / 3), q2 1/2, q3 0, q4 1/2
    assert [(f["task_id"], f["current"], f["change"]) for f in comparison.flipped_tasks] == [
        ("q2", 0.5, "regressed"), ("q3", 0.0, "regressed"), ("q4", 0.5, "regressed")]


def test_the_resume_skips_every_trial_that_completed_in_any_part(tmp_path):
    store = _resumed_run(tmp_path)
    assert store.completed() == {("a", "ehrsql", task, trial) for task, trial in (
        ("q0", 0), ("q0", 1), ("q1", 0), ("q1", 1), ("q2", 0), ("q3", 0), ("q3", 1), ("q4", 0), ("q4", 1))}
    assert store.builds() == {"b1"}


def _one_trial(folder: Path) -> list[tuple]:
    with duckdb.connect() as con:
        load_trials(con, folder)
        return con.execute("select status, reward from trials").fetchall()


@pytest.mark.parametrize(("rows", "expected"), [
    # the later ended_at wins, even in an earlier part (a trial that ended last, recovered from pending/ first)
    ([[("completed", 0.0, RESUME)], [("completed", 1.0, FIRST_RUN)]], ("completed", 0.0)),
    # the same ended_at, or none (hand-made parts): the later part wins
    ([[("completed", 0.0, FIRST_RUN)], [("completed", 1.0, FIRST_RUN)]], ("completed", 1.0)),
    ([[("completed", 0.0, None)], [("completed", 1.0, None)]], ("completed", 1.0)),
    # a row with a time is later than one without
    ([[("completed", 0.0, FIRST_RUN)], [("completed", 1.0, None)]], ("completed", 0.0)),
    # within one part: the later row
    ([[("completed", 0.0, None), ("completed", 1.0, None)]], ("completed", 1.0)),
    # a completed row beats a later error or invalid row (an error is re-run only when none completed)
    ([[("completed", 1.0, FIRST_RUN)], [("error", 0.0, RESUME)]], ("completed", 1.0)),
    # none completed: the latest row, so the trial still shows as an error (or as invalid)
    ([[("invalid", None, FIRST_RUN)], [("error", 0.0, RESUME)]], ("error", 0.0)),
    ([[("error", 0.0, FIRST_RUN)], [("invalid", None, RESUME)]], ("invalid", None)),
])
def test_the_row_that_counts_is_the_latest_completed_else_the_latest(tmp_path, rows, expected):
    store = ResultStore(tmp_path, "r")
    for part in rows:
        store.write([_trial("q1", 0, status, reward, ended_at) for status, reward, ended_at in part])
    assert _one_trial(store.folder) == [expected]


def test_parts_without_newer_columns_or_from_another_writer_still_read(tmp_path):
    folder = tmp_path / "run_id=r"
    folder.mkdir()
    # a part from before retrieved_fhir_ids, answer_judge, tool_errors, stop_reason and ended_at existed
    old_columns = [f for f in TRIAL_SCHEMA if f.name not in
                   {"retrieved_fhir_ids", "answer_judge", "tool_errors", "stop_reason", "ended_at"}]
    old = _trial("q1", 0, "completed", 1.0, FIRST_RUN)
    pq.write_table(pa.Table.from_pylist([{f.name: old.get(f.name) for f in old_columns}],
                                        schema=pa.schema(old_columns)), folder / "part-00000-aaaaaaaa.parquet")
    # another writer: large strings, a 64-bit trial number, a naive nanosecond time, a column of its own (not read)
    pq.write_table(pa.table({"agent": pa.array(["a"], pa.large_string()), "suite": ["ehrsql"], "task_id": ["q2"],
                             "trial": pa.array([0], pa.int64()), "status": ["completed"], "reward": [0.0],
                             "ended_at": pa.array([1_700_000_000_000_000_001], pa.timestamp("ns")),
                             "note": ["not read"]}),
                   folder / "part-00001-bbbbbbbb.parquet")
    with duckdb.connect() as con:
        load_trials(con, folder)
        assert [name for (name, *_) in con.execute("describe trials").fetchall()] == TRIAL_SCHEMA.names
        assert con.execute("select task_id, trial, reward, retrieved_fhir_ids, tool_errors from trials "
                           "order by task_id").fetchall() == [("q1", 0, 1.0, None, None), ("q2", 0, 0.0, None, None)]
    (row,) = metric_table(folder)
    assert (row["tasks"], row["trials"], row["k"], row["success_rate"]) == (2, 2, 1, 0.5)


def test_parts_are_read_and_numbered_in_write_order(tmp_path):
    store = ResultStore(tmp_path, "r")
    store.folder.mkdir()
    for name in ("part-99999-aaaaaaaa.parquet", "part-100000-bbbbbbbb.parquet", "part-00002-cccccccc.parquet"):
        pq.write_table(pa.Table.from_pylist([_trial("q1", 0, "completed", float(name.startswith("part-100000")))],
                                            schema=TRIAL_SCHEMA), store.folder / name)
    # numerically, not by name: part-100000 is the latest (its row counts), and the next part comes after it
    assert [p.name for p in run_parts(store.folder)] == [
        "part-00002-cccccccc.parquet", "part-99999-aaaaaaaa.parquet", "part-100000-bbbbbbbb.parquet"]
    assert _one_trial(store.folder) == [("completed", 1.0)]
    assert store.write([_trial("q2", 0, "completed", 1.0)]).name.startswith("part-100001-")
