"""One trial: an agent on a task, timed, scored, never raising (an agent's failure is a result: status error)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

from ehrbench.agents.base import Agent, AgentAnswer
from ehrbench.dq.score import score_task
from ehrbench.ehrsql.scoring import answers_match, format_answer
from ehrbench.evaluation.tasks import EvalTask
from ehrbench.metrics.retrieval import retrieval_score


def run_trial(agent: Agent, task: EvalTask, trial: int, build_id: str, artifacts: Path) -> dict:
    """The result row of one trial (ehrbench.evaluation.results.TRIAL_SCHEMA)."""
    view = task.view
    row = {"build_id": build_id, "suite": view.suite, "db": view.db, "task_id": view.task_id, "trial": trial,
           "agent": agent.name, "is_answerable": task.gold.is_answerable if view.suite != "dq" else None,
           "started_at": datetime.now(UTC)}
    clock = time.perf_counter()
    try:
        answer = agent.run(view)
        row.update(_scored(task, answer, artifacts / agent.name / view.suite / f"{view.task_id}-{trial}.csv"))
        row.update(status="completed", model=answer.model, abstained=answer.abstained, predicted_sql=answer.sql,
                   tool_calls=answer.tool_calls, user_turns=answer.user_turns, input_tokens=answer.input_tokens,
                   output_tokens=answer.output_tokens, cost_usd=answer.cost_usd,
                   transcript=json.dumps(answer.transcript, default=str))
    except Exception as exc:  # noqa: BLE001 - an agent's failure is recorded, the run goes on
        row.update(status="error", reward=0.0, correct=False, error=f"{type(exc).__name__}: {exc}")
    row.update(latency_s=time.perf_counter() - clock, ended_at=datetime.now(UTC))
    return row


def _scored(task: EvalTask, answer: AgentAnswer, submission: Path) -> dict:
    gold = task.gold
    if task.view.suite == "dq":
        submission.parent.mkdir(parents=True, exist_ok=True)
        submission.write_text("table,_row_id\n" + "".join(f"{t},{r}\n" for t, r in answer.flagged_rows or []))
        score = score_task(gold.dq_task_dir, submission)
        return {"reward": float(score.passed), "correct": score.passed, "dq_recall": score.recall,
                "dq_precision": score.precision, "flagged_rows_path": str(submission)}
    text = answer.answer_text if answer.answer_text is not None else (
        format_answer(answer.answer_rows) if answer.answer_rows is not None else None)
    if answer.abstained:
        correct = not gold.is_answerable
    else:
        correct = gold.is_answerable and text is not None and answers_match(text, gold.answer_text)
    scored = {"reward": float(correct), "correct": correct, "answer": text}
    if task.view.suite == "fhir":
        retrieval = retrieval_score(answer.fhir_ids, gold.fhir_ids)
        scored.update(retrieval_precision=retrieval.precision, retrieval_recall=retrieval.recall)
    return scored
