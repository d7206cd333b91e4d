"""The evaluation harness without Prefect: tasks of a build, trials scored per suite, the resumable parquet store
and the metric table, on hand-made builds and results whose expected values are worked out in comments."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ehrbench.agents.baselines import AbstainAgent, OracleAgent
from ehrbench.evaluation.report import metric_table
from ehrbench.evaluation.results import TRIAL_SCHEMA, ResultStore
from ehrbench.evaluation.tasks import load_tasks
from ehrbench.evaluation.trial import run_trial
from ehrbench.tasks import AgentAnswer, EvalTask, Gold, TaskView

QUESTION_COLUMNS = ["question_id", "suite", "db", "question", "context", "is_answerable", "answer_text",
                    "gold_sql_duckdb", "fhir_ids", "slot_values"]


def fake_build(root: Path) -> Path:
    """A build folder with four questions (ehrsql: two answerable, one not; fhir: one) and one dq task."""
    build = root / "build"
    (build / "questions").mkdir(parents=True)
    rows = [
        dict(question_id="q1", suite="ehrsql", db="mimic_iv", question="How many?", context=None, is_answerable=True,
             answer_text="[['3']]", gold_sql_duckdb="select 3", fhir_ids=None,
             slot_values='{"patient_id": 10009628}'),
        dict(question_id="q2", suite="ehrsql", db="eicu", question="Which?", context=None, is_answerable=True,
             answer_text="[['a'], ['b']]", gold_sql_duckdb="select 'a' union select 'b'", fhir_ids=None),
        dict(question_id="q3", suite="ehrsql", db="mimic_iv", question="Will it rain?", context=None,
             is_answerable=False, answer_text=None, gold_sql_duckdb=None, fhir_ids=None),
        dict(question_id="f1", suite="fhir", db="mimic_iv", question="Last lab?", context="Assume now.",
             is_answerable=True, answer_text="[['1.2']]", gold_sql_duckdb="select 1.2", fhir_ids=["id-a", "id-b"],
             slot_values='{"patient_id": 10009628}'),
    ]
    pq.write_table(pa.Table.from_pylist(rows), build / "questions" / "questions.parquet")
    task = build / "dq" / "audit"
    (task / "data").mkdir(parents=True)
    (task / "gold").mkdir()
    (task / "instruction.md").write_text("# Data-quality audit\n")
    pq.write_table(pa.Table.from_pylist([
        dict(table="labs", row_id="r1", cluster_id="c1", family="f", subtype="s", role="corrupted", field="value",
             original_value="1", corrupted_value="100"),
        dict(table="labs", row_id="r2", cluster_id="c2", family="f", subtype="s", role="corrupted", field="value",
             original_value="2", corrupted_value="200")]), task / "gold" / "labels.parquet")
    return build


def test_tasks_of_a_build_separate_the_agent_view_from_the_gold(tmp_path):
    build = fake_build(tmp_path)
    tasks = load_tasks(build)
    assert [t.key for t in tasks] == [("ehrsql", "q1"), ("ehrsql", "q2"), ("ehrsql", "q3"), ("fhir", "f1"),
                                      ("dq", "audit")]
    ehrsql = tasks[0].view
    assert ehrsql.database == build / "db" / "ehrsql2024" / "mimic_iv.duckdb"
    assert tasks[1].view.database == build / "db" / "ehrsql_eicu" / "eicu.duckdb"
    assert "answer" not in json.dumps(ehrsql.__dict__, default=str)  # no gold in what an agent sees
    assert tasks[3].view.fhir_resources == build / "fhir" / "resources.duckdb"
    # FHIR-AgentBench gives the agent the Patient id: the published id of MIMIC-IV subject 10009628
    # (docs/benchmarks.md#fhir-resource-ids)
    assert tasks[3].view.patient_fhir_id == "51d2190c-cc46-56c5-b2ea-363895cbea75"
    assert ehrsql.patient_fhir_id is None
    assert tasks[4].view.data_dir == build / "dq" / "audit" / "data"
    # a seeded sample per suite: the same for the same seed
    assert [t.key for t in load_tasks(build, ("ehrsql",), limit=2, seed=3)] == \
        [t.key for t in load_tasks(build, ("ehrsql",), limit=2, seed=3)]
    assert len(load_tasks(build, ("ehrsql",), limit=2)) == 2
    with pytest.raises(ValueError, match="unknown suite"):
        load_tasks(build, ("sql",))


class Scripted:
    """An agent answering from a table of scripted answers (or raising)."""

    name = "scripted"

    def __init__(self, answers: dict[str, AgentAnswer | Exception]) -> None:
        self.answers = answers

    def run(self, view: TaskView) -> AgentAnswer:
        answer = self.answers[view.task_id]
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_trials_are_scored_per_suite(tmp_path):
    tasks = {t.view.task_id: t for t in load_tasks(fake_build(tmp_path))}
    agent = Scripted({
        "q1": AgentAnswer(answer_rows=[[3]]),  # rows formatted as EHRSQL-2024 does: [['3']] -> correct
        "q2": AgentAnswer(answer_rows=[["b"], ["a"]]),  # row order ignored -> correct
        "q3": AgentAnswer(answer_rows=[["sunny"]]),  # answered an unanswerable -> wrong
        "f1": AgentAnswer(answer_text="[['1.2']]", fhir_ids=("id-a", "id-x", "id-x")),  # P = 1/2, R = 1/2
        "audit": AgentAnswer(flagged_rows=[("labs", "r1"), ("labs", "zz")]),  # recall 1/2, precision 1/2
    })
    rows = {task_id: run_trial(agent, task, 0, "b1", tmp_path / "artifacts") for task_id, task in tasks.items()}
    assert [rows[q]["reward"] for q in ("q1", "q2", "q3", "f1", "audit")] == [1.0, 1.0, 0.0, 1.0, 0.0]
    assert (rows["f1"]["retrieval_precision"], rows["f1"]["retrieval_recall"]) == (0.5, 0.5)
    assert (rows["audit"]["dq_recall"], rows["audit"]["dq_precision"]) == (0.5, 0.5)
    assert Path(rows["audit"]["flagged_rows_path"]).read_text() == "table,_row_id\nlabs,r1\nlabs,zz\n"
    assert all(row["status"] == "completed" for row in rows.values())

    abstain = {task_id: run_trial(AbstainAgent(), task, 0, "b1", tmp_path / "a") for task_id, task in tasks.items()}
    assert [abstain[q]["reward"] for q in ("q1", "q2", "q3", "f1", "audit")] == [0.0, 0.0, 1.0, 0.0, 0.0]
    oracle = OracleAgent({t.key: t.gold for t in tasks.values()})
    assert all(run_trial(oracle, task, 0, "b1", tmp_path / "o")["reward"] == 1.0 for task in tasks.values())


def test_an_agent_that_fails_is_a_recorded_error_not_a_crash(tmp_path):
    task = EvalTask(TaskView("ehrsql", "q1", "mimic_iv", "How many?"), Gold(True, "[['3']]"))
    row = run_trial(Scripted({"q1": TimeoutError("endpoint did not answer")}), task, 1, "b1", tmp_path)
    assert row["status"] == "error" and row["reward"] == 0.0
    assert row["error"] == "TimeoutError: endpoint did not answer" and row["trial"] == 1


def _row(agent: str, task: str, trial: int, reward: float, status: str = "completed", **extra) -> dict:
    now = datetime.now(UTC)
    return dict(build_id="b1", suite="ehrsql", db="mimic_iv", task_id=task, trial=trial, agent=agent, status=status,
                reward=reward, correct=reward == 1.0, is_answerable=True, abstained=False, latency_s=0.5,
                cost_usd=0.01, started_at=now, ended_at=now, **extra)


def test_the_store_resumes_a_run_and_never_shows_half_a_part(tmp_path):
    store = ResultStore(tmp_path, "r1")
    assert store.completed() == set()
    store.write([_row("a", "q1", 0, 1.0), _row("a", "q1", 1, 0.0, status="error")])
    # the errored trial is not complete: a resumed run runs it again
    assert store.completed() == {("a", "ehrsql", "q1", 0)}
    store.write([_row("a", "q1", 1, 1.0)])
    assert store.completed() == {("a", "ehrsql", "q1", 0), ("a", "ehrsql", "q1", 1)}
    assert len(store.parts()) == 2 and not list(store.folder.glob("*.partial"))
    assert pq.read_schema(store.parts()[0]).names == TRIAL_SCHEMA.names
    assert store.folder.name == "run_id=r1"  # hive-partitioned: readers see the run id as a column
    assert store.builds() == {"b1"}  # what a resume checks against the build it is asked to run on
    for bad in ("", "../x", ".hidden"):
        with pytest.raises(ValueError, match="run id"):
            ResultStore(tmp_path, bad)


def test_a_killed_run_loses_only_the_trials_in_flight(tmp_path):
    store = ResultStore(tmp_path, "r1")
    store.write([_row("a", "q1", 0, 1.0)])
    # two trials of the next batch end (each spills its row), then the run is killed before the batch is written
    store.spill(_row("a", "q2", 0, 0.0, status="error"))
    store.spill(_row("a", "q2", 0, 1.0))  # the same trial again (a retry): its later row replaces the first
    store.spill(_row("llm:m@http://h:1/v1", "q3", 1, 1.0))
    assert store.completed() == {("a", "ehrsql", "q1", 0)} and len(list(store.pending.glob("*.parquet"))) == 2
    resumed = ResultStore(tmp_path, "r1")
    part = resumed.recover()
    assert part is not None and not list(resumed.pending.iterdir())
    assert resumed.completed() == {("a", "ehrsql", "q1", 0), ("a", "ehrsql", "q2", 0),
                                   ("llm:m@http://h:1/v1", "ehrsql", "q3", 1)}
    assert pq.read_table(part).num_rows == 2 and resumed.recover() is None
    # a batch that is written takes its rows out of pending/
    resumed.spill(_row("a", "q4", 0, 1.0))
    resumed.write([_row("a", "q4", 0, 1.0)])
    assert not list(resumed.pending.glob("*.parquet")) and resumed.recover() is None


def test_metric_table_from_the_parquet_parts(tmp_path):
    store = ResultStore(tmp_path, "r1")
    # task q1: trials 1, 1, 0 (s = 2 of n = 3); task q2: 0, 0, 0 (s = 0)
    store.write([_row("a", "q1", 0, 1.0), _row("a", "q1", 1, 1.0), _row("a", "q1", 2, 0.0),
                 _row("a", "q2", 0, 0.0), _row("a", "q2", 1, 0.0)])
    store.write([_row("a", "q2", 2, 0.0, status="error")])
    store.write([_row("a", "q2", 3, 1.0, status="invalid")])  # the simulated user erred: never scored
    (row,) = metric_table(store.folder)
    assert (row["tasks"], row["trials"], row["k"], row["errors"], row["invalid"]) == (2, 6, 3, 1, 1)
    assert row["success_rate"] == pytest.approx(2 / 6)
    # Pass@3: q1 1 - C(1,3)/C(3,3) = 1, q2 0 -> 0.5; Pass^3: q1 C(2,3)/C(3,3) = 0, q2 0 -> 0
    assert row["pass@3"] == pytest.approx(0.5) and row["pass^3"] == 0.0 and row["gap_3"] == pytest.approx(0.5)
    # RS per run (trial index), all items answerable; the error counts as a wrong answer, the invalid trial not at all.
    # run 0: q1 +1, q2 -c; run 1: the same; run 2: q1 -c, q2 (error) -c. RS(0): 1/2, 1/2, 0 -> mean 1/3;
    # RS(10): -9/2, -9/2, -20/2 -> mean -19/3; RS(N), N = 2 per run: -1/2, -1/2, -4/2 -> mean -1
    assert row["RS(0)"] == pytest.approx(1 / 3) and row["RS(10)"] == pytest.approx(-19 / 3)
    assert row["RS(N)"] == pytest.approx(-1.0)
    assert (row["RS(10) min"], row["RS(10) max"]) == (pytest.approx(-10.0), pytest.approx(-4.5))
    # F1_ans: 6 answered (the error too), 6 answerable, 6 both -> 1; F1_exe: TP 2, P = 2/6, R = 2/6 -> 1/3
    assert row["F1_ans"] == pytest.approx(1.0) and row["F1_exe"] == pytest.approx(1 / 3)
    assert row["cost_usd"] == pytest.approx(0.06)
    with pytest.raises(FileNotFoundError, match="no results"):
        metric_table(tmp_path / "run_id=none")


def test_metric_table_rows_start_with_agent_suite_key_metrics_cost_and_latency(tmp_path):
    from tests.report_fixtures import trial, write_run

    folder = write_run(tmp_path, "r", [
        trial(task="q1", cost_usd=0.01, latency_s=0.5),
        trial(suite="dq", task="d1", answerable=None, dq_recall=1.0, dq_precision=0.25, cost_usd=0.02, latency_s=2.0),
        trial(suite="chatqa", task="c1", cost_usd=0.03, latency_s=1.0)])
    rows = {row["suite"]: row for row in metric_table(folder)}
    assert list(rows["ehrsql"])[:5] == ["agent", "suite", "RS(10)", "cost_usd", "latency_s_mean"]
    assert list(rows["dq"])[:7] == ["agent", "suite", "success_rate", "dq_recall", "dq_precision", "cost_usd",
                                    "latency_s_mean"]
    assert list(rows["dq"].values())[2:7] == [1.0, 1.0, 0.25, 0.02, 2.0]
    assert list(rows["chatqa"])[:5] == ["agent", "suite", "success_rate", "cost_usd", "latency_s_mean"]


def test_a_run_compared_with_the_previous_one_shows_metric_changes_and_flipped_tasks(tmp_path):
    from ehrbench.reports.compare import compare_runs, comparison_markdown, previous_run

    old, new = ResultStore(tmp_path, "nightly-20261120T020000Z"), ResultStore(tmp_path, "nightly-20261121T020000Z")
    # q1 solved before, not now (regressed); q2 the other way round (fixed); q3 solved in both
    old.write([_row("a", "q1", 0, 1.0), _row("a", "q2", 0, 0.0), _row("a", "q3", 0, 1.0)])
    new.write([_row("a", "q1", 0, 0.0), _row("a", "q2", 0, 1.0), _row("a", "q3", 0, 1.0)])
    ResultStore(tmp_path, "adhoc").write([_row("a", "q1", 0, 1.0)])  # another prefix: never the previous run
    assert previous_run(tmp_path, new.run_id, "nightly-") == old.folder
    assert previous_run(tmp_path, old.run_id, "nightly-") is None

    comparison = compare_runs(new.folder, old.folder)
    assert comparison.previous_run == old.run_id
    assert [(f["task_id"], f["change"]) for f in comparison.flipped_tasks] == [("q1", "regressed"), ("q2", "fixed")]
    # success rate 2/3 in both runs, F1_exe (2 of 3 correct) likewise, cost and latency the same: nothing changed
    assert comparison.metric_changes == []
    text = comparison_markdown(comparison, new.run_id)
    assert "1 regressed, 1 fixed" in text and "| a | ehrsql | q1 | 1.00 | 0.00 | regressed |" in text
    assert "No metric changed." in text


def test_latency_noise_between_two_runs_is_no_change(tmp_path):
    from ehrbench.reports.compare import compare_runs, comparison_markdown
    from tests.report_fixtures import trial, write_run

    # the same 10 tasks and rewards; latency varies over tasks (1.0 … 1.9 s), the new run 5.98e-05 s slower each:
    # the latency intervals overlap (the old comparison listed the 5.98e-05 as a change)
    def run(run_id: str, noise: float) -> Path:
        return write_run(tmp_path, run_id, [trial(task=f"t{t}", reward=float(t % 2 == 0),
                                                  latency_s=1.0 + t / 10 + noise, cost_usd=0.01) for t in range(10)])

    old, new = run("n-20261120T020000Z", 0.0), run("n-20261121T020000Z", 5.98e-05)
    comparison = compare_runs(new, old)
    assert comparison.metric_changes == [] and comparison.flipped_tasks == []
    text = comparison_markdown(comparison, "n-20261121T020000Z")
    assert "No metric changed." in text
    assert ("when its 95% interval (bootstrap over tasks, 1,000 replicates, seed 0) lies wholly above or below the "
            "previous run's") in text


def test_a_real_drop_in_success_rate_is_listed_with_both_intervals(tmp_path):
    from ehrbench.reports.compare import compare_runs, comparison_markdown
    from tests.report_fixtures import trial, write_run

    # 20 tasks: all solved before (every replicate 1: [100 %, 100 %]), half of them now (SR 50 %, an interval
    # around it that stays below 100 %: 10 of 20 tasks drawn always leave some failed ones in a replicate but for
    # a chance of 2^-20)
    old = write_run(tmp_path, "n-20261120T020000Z", [trial(task=f"t{t}") for t in range(20)])
    new = write_run(tmp_path, "n-20261121T020000Z", [trial(task=f"t{t}", reward=float(t < 10)) for t in range(20)])
    comparison = compare_runs(new, old)
    sr = next(c for c in comparison.metric_changes if c.metric == "success_rate")
    assert (sr.agent, sr.suite, sr.change) == ("a", "ehrsql", "regression")
    assert (sr.previous.value, sr.previous.low, sr.previous.high) == (1.0, 1.0, 1.0)
    assert sr.current.value == 0.5 and sr.current.low < 0.5 < sr.current.high < 1.0
    assert all(c.change == "regression" for c in comparison.metric_changes)
    text = comparison_markdown(comparison, "n-20261121T020000Z")
    low, high = f"{sr.current.low * 100:.1f} %", f"{sr.current.high * 100:.1f} %"
    assert f"| a | ehrsql | SR | 100.0 % [100.0 %, 100.0 %] | 50.0 % [{low}, {high}] | regression |" in text
