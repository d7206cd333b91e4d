"""The metric table of an evaluation run, per agent and suite, read with DuckDB from the run's parquet parts and
computed with `ehrbench.metrics` (docs/benchmarks.md#metrics): success rate (the mean over tasks of each task's mean
reward), Pass@k / Pass^k / Gap-k over the run's k trials (a success: reward ≥ 1 − 1e-6), the reliability score RS(c)
as the published scorer gives it for one run, averaged over the k runs (run r = every task's trial r; `RS(c) min` /
`RS(c) max`: the worst and best run), F1_ans / F1_exe of the question suites, FHIR retrieval precision/recall
(precision None for an agent that retrieved nothing: `ehrbench.metrics.retrieval`), data-quality recall/precision,
cost and latency. Scores are fractions here; the papers print RS(c) and F1 ×100 (`ehrbench.metrics.as_percent`).
Trials that ended in an error count as failures (reward 0) and, in RS(c) and F1, as wrong answers (the published
scorers count a prediction whose execution failed so); trials whose simulated user erred (status invalid) are not
scored at all (docs/benchmarks.md#repeated-trials: re-run, not scored).

A row's keys come in reading order (the Prefect table artifact shows them so): agent, suite, the suite's key
metrics (those of the dashboard's headline; dq adds its recall and precision), cost and latency, then the rest."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ehrbench.evaluation.results import load_trials
from ehrbench.metrics import (
    Outcome,
    RetrievalScore,
    answerability_f1,
    execution_f1,
    gap_k,
    mean_retrieval_score,
    pass_at_k_mean,
    pass_hat_k_mean,
    reliability_scores_over_runs,
    success_rate_over_tasks,
)
from ehrbench.metrics.retrieval import published_mean
from ehrbench.warehouse import open_duckdb

QUESTION_SUITES = ("ehrsql", "chatqa", "fhir")
# per suite, the metrics a reader looks for first, before cost and latency (others: success_rate); ehrsql's is the
# dashboard's headline
KEY_METRICS = {"ehrsql": ("RS(10)",), "dq": ("success_rate", "dq_recall", "dq_precision")}


def read_trials(run_folder: Path) -> list[dict]:
    """The run's trials, one row per (agent, suite, task, trial): `load_trials`'s (a re-run's row, not the error it
    replaced). A part older than retrieved_fhir_ids reads it as null: see _retrieval."""
    with open_duckdb() as con:
        load_trials(con, run_folder)
        cursor = con.execute(
            "select agent, suite, task_id, trial, status, coalesce(reward, 0) as reward, correct, is_answerable, "
            "abstained, retrieval_precision, retrieval_recall, retrieved_fhir_ids, dq_recall, dq_precision, "
            "cost_usd, latency_s, input_tokens, output_tokens, published_correct, published_retrieval_precision, "
            "published_retrieval_recall from trials order by agent, suite, task_id, trial")
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def metric_table(run_folder: Path) -> list[dict]:
    """One row of metrics per (agent, suite)."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for trial in read_trials(run_folder):
        groups[(trial["agent"], trial["suite"])].append(trial)
    return [_metrics(agent, suite, trials) for (agent, suite), trials in sorted(groups.items())]


def _metrics(agent: str, suite: str, all_trials: list[dict]) -> dict:
    trials = [t for t in all_trials if t["status"] != "invalid"]
    if not trials:
        return {"agent": agent, "suite": suite, "tasks": 0, "trials": 0, "invalid": len(all_trials)}
    by_task: dict[str, list[float]] = defaultdict(list)
    for trial in trials:
        by_task[trial["task_id"]].append(float(trial["reward"]))
    k = min(len(rewards) for rewards in by_task.values())
    row = {"agent": agent, "suite": suite, "tasks": len(by_task), "trials": len(trials), "k": k,
           "errors": sum(t["status"] == "error" for t in trials),
           "invalid": len(all_trials) - len(trials),  # the simulated user erred: re-run on resume, never scored
           "success_rate": success_rate_over_tasks(list(by_task.values())),
           f"pass@{k}": pass_at_k_mean(list(by_task.values()), k),
           f"pass^{k}": pass_hat_k_mean(list(by_task.values()), k), f"gap_{k}": gap_k(list(by_task.values()), k),
           "cost_usd": sum(t["cost_usd"] or 0.0 for t in trials),
           "latency_s_mean": sum(t["latency_s"] or 0.0 for t in trials) / len(trials),
           "tokens": sum((t["input_tokens"] or 0) + (t["output_tokens"] or 0) for t in trials)}
    if suite in QUESTION_SUITES:
        runs: dict[int, list[Outcome]] = defaultdict(list)
        for t in trials:
            runs[t["trial"]].append(Outcome.of_trial(t["status"], t["abstained"], t["is_answerable"], t["correct"]))
        for c, scores in reliability_scores_over_runs(runs).items():
            row.update({f"RS({c})": scores.mean, f"RS({c}) min": scores.minimum, f"RS({c}) max": scores.maximum})
        outcomes = [outcome for run in runs.values() for outcome in run]
        row.update(F1_ans=answerability_f1(outcomes).f1, F1_exe=execution_f1(outcomes).f1)
    if suite == "fhir":
        retrieval = mean_retrieval_score(_retrieval(t) for t in trials)
        row.update(retrieval_precision=retrieval.precision, retrieval_recall=retrieval.recall)
        if any(t["published_correct"] is not None for t in trials):
            row.update(_published_metrics(trials))
    if suite == "dq":
        row.update(dq_recall=_mean(t["dq_recall"] for t in trials),
                   dq_precision=_mean(t["dq_precision"] for t in trials))
    return _in_reading_order(row, suite)


def _published_metrics(trials: list[dict]) -> dict:
    """FHIR-AgentBench's own means (its evaluation_metrics.py): accuracy, precision and recall over every trial, an
    erred trial counting 0, and the F1 of the two means."""
    precision, recall, f1 = published_mean(
        RetrievalScore(t["published_retrieval_precision"] or 0.0, t["published_retrieval_recall"] or 0.0, True)
        for t in trials)
    return {"published_accuracy": sum(bool(t["published_correct"]) for t in trials) / len(trials),
            "published_retrieval_precision": precision, "published_retrieval_recall": recall,
            "published_retrieval_f1": f1}


def _retrieval(trial: dict) -> RetrievalScore:
    """A trial's stored retrieval score. Without its ids (a part older than the column) whether it retrieved is
    unknown: it counts as retrieving when it has a precision, which keeps the plain mean those runs were shown with."""
    ids = trial["retrieved_fhir_ids"]
    precision = trial["retrieval_precision"]
    return RetrievalScore(precision=precision, recall=trial["retrieval_recall"],
                          retrieved=bool(ids) if ids is not None else precision is not None)


def _in_reading_order(row: dict, suite: str) -> dict:
    first = ("agent", "suite", *KEY_METRICS.get(suite, ("success_rate",)), "cost_usd", "latency_s_mean")
    return {**{key: row[key] for key in first if key in row}, **row}


def _mean(values) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None
