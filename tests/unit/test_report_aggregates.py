"""The report's aggregation queries on small hand-made parquet runs: values computed by hand, and the same values
as `ehrbench.metrics` / the evaluation metric table (the definitions) on a random run."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from ehrbench.evaluation.report import metric_table
from ehrbench.metrics import retrieval_score
from ehrbench.reports import aggregates, catalog
from ehrbench.reports.assemble import open_run, report_data, series_runs, trend_prefix
from ehrbench.reports.model import Bootstrap, Estimate
from ehrbench.reports.site import render_site, task_href
from tests.report_fixtures import trial, write_build, write_run

NO_CI = Bootstrap(replicates=0, seed=0, level=0.95)


def board_of(folder: Path, bootstrap: Bootstrap = NO_CI) -> dict:
    with open_run(folder) as con:
        return {(row.suite, row.agent): row for rows in aggregates.leaderboard(con, bootstrap).values()
                for row in rows}


def test_success_pass_k_and_counts_by_hand(tmp_path):
    # task t1: 3 of 3 succeed; t2: 1 of 3 (one error); t3: 2 of 3, plus an invalid trial that is not scored
    rows = [trial(task="t1", k=i) for i in range(3)]
    rows += [trial(task="t2", k=0), trial(task="t2", k=1, reward=0.0),
             trial(task="t2", k=2, status="error", reward=0.0)]
    rows += [trial(task="t3", k=0), trial(task="t3", k=1), trial(task="t3", k=2, reward=0.0),
             trial(task="t3", k=3, status="invalid", reward=None)]
    row = board_of(write_run(tmp_path, "r", rows))[("ehrsql", "a")]
    assert (row.tasks, row.trials, row.k, row.errors, row.invalid, row.failing_tasks) == (3, 9, 3, 1, 1, 2)
    assert row.values["success_rate"].value == pytest.approx(6 / 9)
    # k = 3 of 3 trials: Pass@3 = share of tasks with any success, Pass^3 = share with all successes
    assert row.values["pass_at_k"].value == pytest.approx(1.0)
    assert row.values["pass_hat_k"].value == pytest.approx(1 / 3)


def test_pass_at_k_with_k_below_n_by_hand(tmp_path):
    # one task, n = 4 trials, s = 1 success, k = 2 (another task has only 2 trials):
    # Pass@2 = 1 − C(3,2)/C(4,2) = 1 − 3/6 = 0.5; Pass^2 = C(1,2)/C(4,2) = 0
    rows = [trial(task="t1", k=0), *(trial(task="t1", k=i, reward=0.0) for i in (1, 2, 3)),
            trial(task="t2", k=0), trial(task="t2", k=1)]
    row = board_of(write_run(tmp_path, "r", rows))[("ehrsql", "a")]
    assert row.k == 2
    assert row.values["pass_at_k"].value == pytest.approx((0.5 + 1.0) / 2)
    assert row.values["pass_hat_k"].value == pytest.approx((0.0 + 1.0) / 2)


def test_reliability_score_and_f1_by_hand(tmp_path):
    # one run of 5 items: correct answer (+1), correct abstention on unanswerable (+1), abstained on answerable (0),
    # wrong answer (−c), and an error trial, which the published scorer counts as an answer that failed (−c)
    rows = [trial(task="t1"), trial(task="t2", answerable=False, abstained=True, reward=1.0),
            trial(task="t3", abstained=True, reward=0.0), trial(task="t4", reward=0.0),
            trial(task="t5", status="error", reward=0.0)]
    values = board_of(write_run(tmp_path, "r", rows))[("ehrsql", "a")].values
    assert values["rs_0"].value == pytest.approx(2 / 5)
    assert values["rs_10"].value == pytest.approx((2 - 2 * 10) / 5)
    assert values["rs_n"].value == pytest.approx((2 - 2 * 5) / 5)
    # answered: t1, t4, t5; answerable: t1, t3, t4, t5 → F1_ans: P = 3/3, R = 3/4; F1_exe: tp = 1 → P 1/3, R 1/4
    assert values["f1_ans"].value == pytest.approx(2 * 1 * (3 / 4) / (1 + 3 / 4))
    assert values["f1_exe"].value == pytest.approx(2 * (1 / 3) * (1 / 4) / (1 / 3 + 1 / 4))
    assert values["success_rate"].value == pytest.approx(2 / 5)


def test_reliability_score_is_the_mean_of_the_runs_by_hand(tmp_path):
    # 2 tasks × 3 runs (trial index). run 0: t1 right, t2 right; run 1: t1 right, t2 wrong; run 2: t1 wrong, t2
    # invalid (not scored: run 2 has 1 item). RS(10) per run: 2/2 = 1, (1 − 10)/2 = −4.5, (0 − 10)/1 = −10
    # → mean −13.5/3.
    # RS(N) with each run's own N: 1, (1 − 2)/2 = −0.5, (0 − 1)/1 = −1 → mean −0.5/3; pooled over the 5 scored
    # trials it would be (3 − 5·2)/5 = −1.4.
    rows = [trial(task="t1", k=0), trial(task="t2", k=0), trial(task="t1", k=1),
            trial(task="t2", k=1, reward=0.0), trial(task="t1", k=2, reward=0.0),
            trial(task="t2", k=2, status="invalid", reward=None)]
    values = board_of(write_run(tmp_path, "r", rows))[("ehrsql", "a")].values
    assert values["rs_10"].value == pytest.approx(-13.5 / 3)
    assert values["rs_n"].value == pytest.approx(-0.5 / 3)
    assert values["rs_0"].value == pytest.approx((1 + 0.5 + 0) / 3)
    assert (values["rs_10_min"].value, values["rs_10_max"].value) == (pytest.approx(-10.0), pytest.approx(1.0))
    # SR: t1 2/3, t2 1/2 (2 scored trials) → mean over tasks 7/12, not 3/5 pooled
    assert values["success_rate"].value == pytest.approx(7 / 12)


def test_a_reward_within_a_millionth_of_one_is_a_success(tmp_path):
    # tau-bench's rule: reward ≥ 1 − 1e-6 succeeds; 0.999 does not
    rows = [trial(task="t1", reward=1 - 1e-7), trial(task="t2", reward=0.999)]
    values = board_of(write_run(tmp_path, "r", rows))[("ehrsql", "a")].values
    assert values["pass_hat_k"].value == pytest.approx(0.5)


def test_fhir_and_dq_means_skip_missing_values(tmp_path):
    rows = [trial(suite="fhir", task="f1", retrieval_precision=1.0, retrieval_recall=0.5),
            trial(suite="fhir", task="f2", reward=0.0, retrieval_precision=None, retrieval_recall=0.0),
            trial(suite="dq", task="d1", answerable=None, dq_recall=1.0, dq_precision=0.02),
            trial(suite="dq", task="d2", answerable=None, reward=0.0, dq_recall=0.5, dq_precision=0.5,
                  cost_usd=0.25, latency_s=3.0)]
    board = board_of(write_run(tmp_path, "r", rows))
    fhir, dq = board[("fhir", "a")].values, board[("dq", "a")].values
    assert (fhir["retrieval_precision"].value, fhir["retrieval_recall"].value) == (1.0, 0.25)
    assert fhir["success_rate"].value == 0.5
    assert (dq["dq_recall"].value, dq["dq_precision"].value) == (0.75, pytest.approx(0.26))
    assert "rs_10" not in dq and dq["cost_per_trial"].value == 0.25 and dq["latency_per_trial"].value == 3.0


def _fhir(agent: str, task: str, k: int, retrieved: list[str], gold: list[str]) -> dict:
    score = retrieval_score(retrieved, gold)
    return trial(agent, "fhir", task, k, reward=0.0, retrieval_precision=score.precision,
                 retrieval_recall=score.recall, retrieved_fhir_ids=retrieved)


def retrieval_run(tmp_path: Path) -> Path:
    """f1 has no gold resource, f2 the gold {x}; `abstain` never retrieves, `some` does in 3 of its 4 trials."""
    rows = [_fhir("abstain", "f1", k, [], []) for k in (0, 1)] + [_fhir("abstain", "f2", k, [], ["x"]) for k in (0, 1)]
    rows += [_fhir("some", "f1", 0, [], []), _fhir("some", "f1", 1, ["y"], []),  # P 1, R 1; P 0, R excluded
             _fhir("some", "f2", 0, ["x"], ["x"]), _fhir("some", "f2", 1, ["z"], ["x"])]  # P 1, R 1; P 0, R 0
    return write_run(tmp_path, "r", rows)


def test_an_agent_that_never_retrieves_has_no_retrieval_precision(tmp_path):
    # abstain: precision defined only on f1 (both empty, 1), but it retrieved nothing: undefined, not 100 %;
    # recall (1 + 1 + 0 + 0) / 4. some: precision (1 + 0 + 1 + 0) / 4, recall (1 + 1 + 0) / 3.
    folder = retrieval_run(tmp_path)
    expected = {"abstain": (None, 0.5), "some": (0.5, pytest.approx(2 / 3))}
    board = board_of(folder, Bootstrap(200, 0, 0.95))
    assert {agent: (board[("fhir", agent)].values["retrieval_precision"].value,
                    board[("fhir", agent)].values["retrieval_recall"].value) for agent in expected} == expected
    assert board[("fhir", "abstain")].values["retrieval_precision"] == Estimate(None, None, None)
    table = {row["agent"]: (row["retrieval_precision"], row["retrieval_recall"]) for row in metric_table(folder)}
    assert table == expected
    data = report_data(tmp_path, "r", tmp_path / "none", bootstrap=NO_CI)
    html = render_site(data, tmp_path / "site").read_text()
    cell = re.search(r'<tr class="agent-row" data-agent="abstain">.*?data-metric="retrieval_precision" '
                     r'data-value="">(.*?)</td>', html, re.S)
    assert cell is not None and ">—<" in cell.group(1)


def test_a_bootstrap_replicate_without_retrieval_has_no_precision(tmp_path):
    # 4 tasks without gold where nothing is retrieved (P 1 each) and one where a wrong resource is (P 0): P = 4/5.
    # A replicate drawing the fifth task j times has P = (5 − j)/5, at most 4/5 (j = 1: most of them, so the 97.5th
    # percentile); one that misses it (a third of them) retrieved nothing and has no precision — counted as 1, it
    # would make that percentile 1.
    rows = [_fhir("a", f"f{t}", 0, [], []) for t in range(4)] + [_fhir("a", "f4", 0, ["y"], [])]
    estimate = board_of(write_run(tmp_path, "r", rows), Bootstrap(400, 0, 0.95))[("fhir", "a")].values[
        "retrieval_precision"]
    assert estimate.value == pytest.approx(0.8) and estimate.high == pytest.approx(0.8)


def test_the_leaderboard_agrees_with_the_metric_definitions_on_a_random_run(tmp_path):
    rng = random.Random(5)
    rows = []
    for agent in ("a", "b"):
        for suite in ("ehrsql", "chatqa", "fhir"):
            for t in range(12):
                answerable = rng.random() < 0.8
                for k in range(4):
                    status = rng.choices(["completed", "error", "invalid"], [0.85, 0.1, 0.05])[0]
                    abstained = status == "completed" and rng.random() < 0.2
                    good = status == "completed" and rng.random() < 0.6
                    reward = None if status == "invalid" else float(
                        (abstained and not answerable) or (good and not abstained and answerable))
                    rows.append(trial(agent, suite, f"{suite}{t}", k, status, reward, answerable, abstained,
                                      retrieval_precision=rng.random() if suite == "fhir" else None,
                                      cost_usd=rng.random(), latency_s=rng.random()))
    folder = write_run(tmp_path, "r", rows)
    board = board_of(folder)
    checked = 0
    for reference in metric_table(folder):
        values = board[(reference["suite"], reference["agent"])].values
        k = reference["k"]
        pairs = {"success_rate": "success_rate", f"pass@{k}": "pass_at_k", f"pass^{k}": "pass_hat_k",
                 f"gap_{k}": "gap_k", "RS(0)": "rs_0", "RS(5)": "rs_5", "RS(10)": "rs_10", "RS(N)": "rs_n",
                 "F1_ans": "f1_ans", "F1_exe": "f1_exe", "retrieval_precision": "retrieval_precision",
                 "RS(10) min": "rs_10_min", "RS(10) max": "rs_10_max"}
        for name, key in pairs.items():
            if name in reference and key in values:
                assert values[key].value == pytest.approx(reference[name]), (reference["agent"], name)
                checked += 1
    # ehrsql: SR, Pass@k, Pass^k, RS×4, RS(10) min/max, F1×2; chatqa: + Gap-k; fhir: + retrieval P
    assert checked == 2 * (11 + 4 + 4)


def test_bootstrap_intervals_are_seeded_and_hold_the_estimate(tmp_path):
    rng = random.Random(1)
    rows = [trial(task=f"t{t}", k=k, reward=float(rng.random() < 0.5)) for t in range(30) for k in range(2)]
    folder = write_run(tmp_path, "r", rows)
    first = board_of(folder, Bootstrap(400, seed=3, level=0.95))[("ehrsql", "a")].values["success_rate"]
    again = board_of(folder, Bootstrap(400, seed=3, level=0.95))[("ehrsql", "a")].values["success_rate"]
    other = board_of(folder, Bootstrap(400, seed=4, level=0.95))[("ehrsql", "a")].values["success_rate"]
    assert first == again and (first.low, first.high) != (other.low, other.high)
    assert first.low < first.value < first.high
    # a proportion over 30 tasks: the interval is about ±1.96·sqrt(p(1−p)/30) ≈ ±0.18 (trials within a task
    # are resampled together, so not ±0.13 as 60 independent trials would give)
    assert 0.25 < first.high - first.low < 0.5


def test_an_agent_that_always_succeeds_has_a_degenerate_interval(tmp_path):
    folder = write_run(tmp_path, "r", [trial(task=f"t{t}") for t in range(5)])
    estimate = board_of(folder, Bootstrap(100, 0, 0.95))[("ehrsql", "a")].values["success_rate"]
    assert (estimate.value, estimate.low, estimate.high) == (1.0, 1.0, 1.0)


def test_wilson_interval_known_values():
    low, high = aggregates.wilson(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    low, high = aggregates.wilson(5, 10)
    assert (low, high) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    assert aggregates.wilson(0, 0) == (None, None)


def test_breakdowns_by_facet_with_wilson_intervals(tmp_path):
    build = write_build(tmp_path / "benchmarks")
    rows = [trial(task="t1", k=0), trial(task="t1", k=1, reward=0.0), trial(task="t2"),
            trial(task="t3", answerable=False, abstained=True), trial(suite="fhir", task="f1", reward=0.0),
            trial(suite="dq", task="combined_clues", answerable=None)]
    with open_run(write_run(tmp_path / "results", "r", rows)) as con:
        catalog.register_build(con, build)
        aggregates.compute_task_stats(con)
        found = {(b.facet, b.suite, b.value): b for b in aggregates.breakdowns(con)}
    labs = found[("category", "ehrsql", "labs")]
    assert (labs.tasks, labs.trials, labs.success_rate.value) == (2, 3, pytest.approx(2 / 3))
    assert (labs.success_rate.low, labs.success_rate.high) == pytest.approx(aggregates.wilson(2, 3))
    assert found[("category", "ehrsql", "unanswerable")].tasks == 1
    assert found[("database", "ehrsql", "eicu")].trials == 2
    assert found[("time_expression", "ehrsql", "rel-year-since")].trials == 2
    assert found[("time_expression", "ehrsql", "none")].trials == 2
    assert {v for f, s, v in found if f == "fhir_resource_type"} == {"Observation", "Encounter"}
    assert found[("dq_family", "dq", "combined")].success_rate.value == 1.0
    assert found[("dq_variant", "dq", "clues")].tasks == 1


def test_position_bias_is_success_by_the_letter_the_correct_option_was_shown_at(tmp_path):
    # agent a: right whenever the correct option is shown at A (3 of 3), never at C (0 of 2), 1 of 2 at E; an
    # invalid trial and an open-ended one (no position) do not count; agent b: one trial at A, wrong
    rows = [trial(suite="noteqa", task=f"q{i}-multichoice", k=k, correct_option=letter, reward=reward)
            for i, (k, letter, reward) in enumerate([(0, "A", 1.0), (1, "A", 1.0), (2, "A", 1.0), (0, "C", 0.0),
                                                     (1, "C", 0.0), (0, "E", 1.0), (1, "E", 0.0)])]
    rows += [trial(suite="noteqa", task="q9-multichoice", k=3, correct_option="C", status="invalid", reward=None),
             trial(suite="noteqa", task="q0-openended"),
             trial(agent="b", suite="noteqa", task="q0-multichoice", correct_option="A", reward=0.0)]
    with open_run(write_run(tmp_path, "r", rows)) as con:
        found = {(b.agent, b.value): b for b in aggregates.position_bias(con)}
    assert set(found) == {("a", "A"), ("a", "C"), ("a", "E"), ("b", "A")}
    assert {key: (b.tasks, b.trials, b.success_rate.value) for key, b in found.items()} == {
        ("a", "A"): (3, 3, 1.0), ("a", "C"): (2, 2, 0.0), ("a", "E"): (2, 2, 0.5), ("b", "A"): (1, 1, 0.0)}
    assert all(b.facet == "noteqa_answer_position" and b.suite == "noteqa" for b in found.values())
    assert (found[("a", "E")].success_rate.low, found[("a", "E")].success_rate.high) == pytest.approx(
        aggregates.wilson(1, 2))


def test_pass_curve_starts_at_the_success_rate_and_diverges(tmp_path):
    rows = [trial(task="t1", k=0), trial(task="t1", k=1, reward=0.0), trial(task="t1", k=2, reward=0.0),
            trial(task="t2", k=0), trial(task="t2", k=1), trial(task="t2", k=2)]
    with open_run(write_run(tmp_path, "r", rows)) as con:
        aggregates.compute_task_stats(con)
        curve = {p.k: p for p in aggregates.pass_curves(con)}
    assert sorted(curve) == [1, 2, 3]
    assert curve[1].pass_at_k == pytest.approx(4 / 6) and curve[1].pass_hat_k == pytest.approx(4 / 6)
    # t1 (n=3, s=1): Pass@2 = 1 − C(2,2)/C(3,2) = 2/3, Pass^2 = 0; t2 always 1
    assert curve[2].pass_at_k == pytest.approx((2 / 3 + 1) / 2) and curve[2].pass_hat_k == pytest.approx(0.5)
    assert curve[3].pass_at_k == pytest.approx(1.0) and curve[3].pass_hat_k == pytest.approx(0.5)


def test_failing_tasks_worst_first_with_their_question(tmp_path):
    build = write_build(tmp_path / "benchmarks")
    rows = [trial(task="t1", k=0), trial(task="t1", k=1, status="error", reward=0.0),
            trial(task="t2", reward=0.0), trial(task="t3", answerable=False, abstained=True)]
    with open_run(write_run(tmp_path / "results", "r", rows)) as con:
        catalog.register_build(con, build)
        aggregates.compute_task_stats(con)
        failing = aggregates.failing_tasks(con)[("a", "ehrsql")]
    assert [(f.task_id, f.mean_reward) for f in failing] == [("t2", 0.0), ("t1", 0.5)]
    assert failing[1].question == "What was the last glucose?" and failing[1].statuses == "completed×1, error×1"


def test_report_data_gathers_tasks_gold_and_transcripts(tmp_path):
    write_build(tmp_path / "benchmarks")
    flagged = tmp_path / "flagged.csv"
    flagged.write_text("table,_row_id\nlab_results,zz\nlab_results,ab\n")
    rows = [trial(task="t1", answer="[['1']]", predicted_sql="select 1"),
            trial(suite="fhir", task="f1", retrieved_fhir_ids=["id-2", "other"]),
            trial(suite="dq", task="combined", answerable=None, reward=0.0, transcript="not json",
                  flagged_rows_path=str(flagged))]
    write_run(tmp_path / "results", "r", rows)
    data = report_data(tmp_path / "results", "r", tmp_path / "benchmarks", bootstrap=NO_CI)
    tasks = {(t.suite, t.task_id): t for t in data.tasks}
    t1 = tasks[("ehrsql", "t1")]
    assert (t1.gold_sql, t1.gold_answer, t1.facets["category"]) == ("select 1", "[['1']]", ["labs"])
    assert t1.trials[0].transcript == [{"role": "assistant", "content": "x"}]
    dq = tasks[("dq", "combined")]
    assert dq.question == "Audit combined" and dq.gold_dq_labels[0]["cluster_id"] == "c1"
    assert dq.trials[0].transcript == [{"role": "harness", "content": "not json"}]
    assert dq.trials[0].flagged_rows == [  # the labelled row first, with its error
        {"table": "lab_results", "row_id": "ab", "cluster_id": "c1", "subtype": "in_table_duplicate"},
        {"table": "lab_results", "row_id": "zz", "cluster_id": None, "subtype": None}]
    page = (render_site(data, tmp_path / "site").parent / task_href("dq", "combined")).read_text()
    assert "Rows flagged (2; 1 labelled, 1 of 1 errors caught)" in page
    f1 = tasks[("fhir", "f1")]
    assert (f1.gold_fhir_ids, f1.trials[0].retrieved_fhir_ids) == (["id-1", "id-2"], ["id-2", "other"])
    assert t1.trials[0].retrieved_fhir_ids == []
    assert data.build.build_id == "b1" and data.suites == ["ehrsql", "fhir", "dq"] and data.trend_runs == ["r"]


def test_a_report_without_its_build_folder_still_renders_task_ids(tmp_path):
    write_run(tmp_path / "results", "r", [trial(task="t1")])
    data = report_data(tmp_path / "results", "r", tmp_path / "nowhere", bootstrap=NO_CI)
    assert data.build is None and data.tasks[0].question == "" and data.breakdowns == []


def test_series_runs_take_the_prefix_and_stop_at_the_run(tmp_path):
    for run_id in ("nightly-20261101T020000Z", "nightly-20261102T020000Z", "nightly-20261103T020000Z",
                   "20261102T020000Z", "nightly-x", "other"):
        write_run(tmp_path, run_id, [trial()])
    assert trend_prefix("nightly-20261102T020000Z") == "nightly-" and trend_prefix("other") is None
    assert series_runs(tmp_path, "nightly-20261102T020000Z", "nightly-") == [
        "nightly-20261101T020000Z", "nightly-20261102T020000Z"]
    assert series_runs(tmp_path, "20261102T020000Z", "") == ["20261102T020000Z"]
    assert series_runs(tmp_path, "other", None) == ["other"]


def test_an_interval_wholly_below_the_previous_one_is_a_regression(tmp_path):
    good = [trial(task=f"t{t}", k=k) for t in range(20) for k in range(2)]
    mixed = [trial(task=f"t{t}", k=k, reward=float(t % 4 == 0)) for t in range(20) for k in range(2)]
    same = [trial(task=f"t{t}", k=k, reward=float(t % 4 == 0)) for t in range(20) for k in range(2)]
    for run_id, rows in (("n-20261101T020000Z", mixed), ("n-20261102T020000Z", good),
                         ("n-20261103T020000Z", same)):
        write_run(tmp_path, run_id, rows)
    data = report_data(tmp_path, "n-20261103T020000Z", tmp_path / "none", bootstrap=Bootstrap(200, 0, 0.95))
    sr = {p.run_id: p for p in data.trends if p.metric == "success_rate"}
    assert data.trend_runs == ["n-20261101T020000Z", "n-20261102T020000Z", "n-20261103T020000Z"]
    assert sr["n-20261101T020000Z"].change is None
    assert sr["n-20261102T020000Z"].change == "improvement"
    assert sr["n-20261103T020000Z"].change == "regression"
    # the earlier runs' leaderboards were kept beside their parts, and the kept ones give the same trend
    assert len(list((tmp_path / "run_id=n-20261101T020000Z" / "report-cache").glob("leaderboard-*.json"))) == 1
    again = report_data(tmp_path, "n-20261103T020000Z", tmp_path / "none", bootstrap=Bootstrap(200, 0, 0.95))
    assert again.trends == data.trends


def test_overlapping_intervals_are_no_change(tmp_path):
    # 12/20 then 9/20 tasks solved: the values differ, the intervals overlap — noise, not a regression
    for run_id, solved in (("n-20261101T020000Z", 12), ("n-20261102T020000Z", 9)):
        write_run(tmp_path, run_id, [trial(task=f"t{t}", reward=float(t < solved)) for t in range(20)])
    data = report_data(tmp_path, "n-20261102T020000Z", tmp_path / "none", bootstrap=Bootstrap(200, 0, 0.95))
    assert [p.change for p in data.trends if p.metric == "success_rate"] == [None, None]


def test_pass_k_of_runs_with_another_k_is_not_compared(tmp_path):
    # all 20 tasks solved in 3 of 3 trials, then in 1 of 2 — Pass^3 against Pass^2: different metrics
    write_run(tmp_path, "n-20261101T020000Z", [trial(task=f"t{t}", k=k) for t in range(20) for k in range(3)])
    write_run(tmp_path, "n-20261102T020000Z", [trial(task=f"t{t}", k=k, reward=float(k == 0))
                                               for t in range(20) for k in range(2)])
    data = report_data(tmp_path, "n-20261102T020000Z", tmp_path / "none", bootstrap=Bootstrap(200, 0, 0.95))
    changes = {p.metric: p.change for p in data.trends if p.run_id == "n-20261102T020000Z"}
    assert changes["pass_hat_k"] is None and changes["success_rate"] == "regression"


def test_the_headline_table_for_prefect_has_every_agent_and_the_regressions(tmp_path):
    from ehrbench.reports.summary import headline_markdown

    write_run(tmp_path, "n-20261101T020000Z", [trial(agent=a, task=f"t{t}") for a in ("a", "b") for t in range(10)])
    write_run(tmp_path, "n-20261102T020000Z", [trial(agent=a, task=f"t{t}", reward=float(a == "a"))
                                               for a in ("a", "b") for t in range(10)])
    data = report_data(tmp_path, "n-20261102T020000Z", tmp_path / "none", bootstrap=Bootstrap(100, 0, 0.95))
    text = headline_markdown(data, "file:///site/index.html")
    # RS(10) is ehrsql's headline: a answers all 10 right (100.0), b all wrong (−1000.0)
    assert "| a | 100.0 [100.0, 100.0] | 10 | 0 | 0 |" in text
    assert "| b | -1000.0 [-1000.0, -1000.0] | 10 | 0 | 0 |" in text
    assert text.index("| a |") < text.index("| b |") and "(file:///site/index.html)" in text
    assert "regression(s) since the previous run:** b ehrsql" in text


def test_cost_and_latency_change_only_by_a_margin_a_person_acts_on():
    """Timings of a busy machine separate by milliseconds with tight intervals: not a change. Quality metrics keep
    the plain interval rule."""
    from ehrbench.reports.assemble import change
    from ehrbench.reports.model import Estimate, LeaderboardRow

    def row(latency: Estimate, success: Estimate) -> LeaderboardRow:
        return LeaderboardRow("abstain", "chatqa", tasks=200, trials=400, k=2, errors=0, invalid=0, failing_tasks=0,
                              values={"latency_per_trial": latency, "success_rate": success})

    before = row(Estimate(0.00002, 0.00001, 0.00003), Estimate(0.50, 0.45, 0.55))
    noise = row(Estimate(0.00008, 0.00007, 0.00009), Estimate(0.51, 0.46, 0.56))  # separate intervals, 60 µs
    assert change("latency_per_trial", before, noise) is None
    assert change("success_rate", before, noise) is None  # overlapping intervals
    slow = row(Estimate(12.0, 11.0, 13.0), Estimate(0.30, 0.25, 0.35))
    slower = row(Estimate(16.0, 15.0, 17.0), Estimate(0.30, 0.25, 0.35))  # +4 s = +33 %: above both floors
    assert change("latency_per_trial", slow, slower) == "regression"
    assert change("success_rate", before, slow) == "regression"  # 0.55 → 0.35 wholly below 0.45
    barely = row(Estimate(13.9, 13.8, 14.0), Estimate(0.30, 0.25, 0.35))  # separated, but +1.9 s = +16 % < 20 %
    assert change("latency_per_trial", slow, barely) is None


def test_an_imported_task_set_has_a_leaderboard_apart_from_the_suite_it_runs_in(tmp_path):
    # the build's own ehrsql question passes; the task set's two tasks (same suite, ids `<task set>/<id>`) fail one
    rows = [trial(task="t1"),
            trial(task="ehrsql2024-valid/q1", taskset="ehrsql2024-valid"),
            trial(task="ehrsql2024-valid/q2", taskset="ehrsql2024-valid", reward=0.0)]
    write_run(tmp_path / "results", "r", rows)
    data = report_data(tmp_path / "results", "r", tmp_path / "nowhere", bootstrap=NO_CI)
    assert set(data.leaderboard) == {"ehrsql", "ehrsql@ehrsql2024-valid"}
    own, imported = data.leaderboard["ehrsql"][0], data.leaderboard["ehrsql@ehrsql2024-valid"][0]
    assert (own.tasks, own.values["success_rate"].value) == (1, 1.0)
    assert (imported.tasks, imported.values["success_rate"].value) == (2, 0.5)
    # the task set's board has its suite's columns and headline: RS(10) of ehrsql
    assert data.headline["ehrsql@ehrsql2024-valid"] == "rs_10" and "rs_10" in imported.values
    assert imported.values["rs_10"].value == (1 - 10) / 2  # one right, one wrong answer in its only run
    render_site(data, tmp_path / "site")  # every page renders, task-set task ids ('/') included
