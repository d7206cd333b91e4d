"""The metric table of an evaluation run, per agent and suite, read with DuckDB from the run's parquet parts and
computed with `ehrbench.metrics` (DESIGN §5.6): success rate, Pass@k / Pass^k / Gap-k over the run's k trials, the
reliability score RS(c) and F1_ans / F1_exe of the question suites, FHIR retrieval precision/recall, data-quality
recall/precision, cost and latency. Trials that ended in an error count as failures (reward 0); trials whose
simulated user erred (status invalid) are not scored at all (DESIGN §5.6: re-run, not scored)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import duckdb

from ehrbench.evaluation.results import run_parts
from ehrbench.metrics import (
    Outcome,
    answerability_f1,
    execution_f1,
    gap_k,
    pass_at_k_mean,
    pass_hat_k_mean,
    reliability_scores,
    success_rate,
)

QUESTION_SUITES = ("ehrsql", "chatqa", "fhir")


def read_trials(run_folder: Path) -> list[dict]:
    parts = run_parts(run_folder)
    with duckdb.connect() as con:
        cursor = con.execute(
            "select agent, suite, task_id, trial, status, coalesce(reward, 0) as reward, correct, is_answerable, "
            "abstained, retrieval_precision, retrieval_recall, dq_recall, dq_precision, cost_usd, latency_s, "
            "input_tokens, output_tokens from read_parquet(?, union_by_name = true) "
            "order by agent, suite, task_id, trial",
            [[str(p) for p in parts]])
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
           "success_rate": success_rate([r for rewards in by_task.values() for r in rewards]),
           f"pass@{k}": pass_at_k_mean(list(by_task.values()), k),
           f"pass^{k}": pass_hat_k_mean(list(by_task.values()), k), f"gap_{k}": gap_k(list(by_task.values()), k),
           "cost_usd": sum(t["cost_usd"] or 0.0 for t in trials),
           "latency_s_mean": sum(t["latency_s"] or 0.0 for t in trials) / len(trials),
           "tokens": sum((t["input_tokens"] or 0) + (t["output_tokens"] or 0) for t in trials)}
    if suite in QUESTION_SUITES:
        outcomes = [Outcome(answered=not t["abstained"], answerable=bool(t["is_answerable"]),
                            correct=bool(t["correct"]) and not t["abstained"] and bool(t["is_answerable"]))
                    for t in trials if t["status"] == "completed"]
        if outcomes:
            row.update({f"RS({c})": score for c, score in reliability_scores(outcomes).items()})
            row.update(F1_ans=answerability_f1(outcomes).f1, F1_exe=execution_f1(outcomes).f1)
    if suite == "fhir":
        row.update(retrieval_precision=_mean(t["retrieval_precision"] for t in trials),
                   retrieval_recall=_mean(t["retrieval_recall"] for t in trials))
    if suite == "dq":
        row.update(dq_recall=_mean(t["dq_recall"] for t in trials),
                   dq_precision=_mean(t["dq_precision"] for t in trials))
    return row


def _mean(values) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None
