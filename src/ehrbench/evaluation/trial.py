"""One trial: an agent on a task, timed and scored. An agent's failure is a result (status error), never an
exception — except a transient one (an endpoint still failing after its SDK's retries: rate limits, 5xx, timeouts),
which `run_trial(raise_transient=True)` re-raises for the orchestrator to retry the whole trial later."""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from ehrbench.dq.score import score_task
from ehrbench.evaluation.judge import AnswerJudge
from ehrbench.llm.chat import ChatError
from ehrbench.noteqa.options import for_trial, order_label
from ehrbench.scoring import protocol_of, score_trial
from ehrbench.tasks import WORKSPACE_SUITES, Agent, AgentAnswer, EvalTask
from ehrbench.workspace.verify import family


class TransientTrialError(RuntimeError):
    """A trial stopped by an endpoint failure that may pass (rate limit, 5xx, timeout): retry the trial later."""


def run_trial(agent: Agent, task: EvalTask, trial: int, build_id: str, artifacts: Path, *,
              judge: AnswerJudge | None = None, raise_transient: bool = False) -> dict:
    """The result row of one trial (ehrbench.evaluation.results.TRIAL_SCHEMA). `judge` decides free-text answers
    (default: the normalised match, no model)."""
    task = for_trial(task, trial)  # a noteqa trial's option order
    row = trial_row(agent.name, task, trial, build_id, getattr(agent, "sandbox", None))
    clock = time.perf_counter()
    try:
        if task.view.suite in WORKSPACE_SUITES:
            task = replace(task, view=replace(task.view, workspace=_fresh_workspace(task, trial, agent.name,
                                                                                   artifacts)))
        answer = agent.run(task.view)
        if answer.user_error:
            row.update(status="invalid", error="the simulated user erred in every attempt (validator)")
        else:
            submission = artifacts / _folder_name(agent.name) / task.view.suite / f"{task.view.task_id}-{trial}.csv"
            row.update(_scored(task, answer, submission, judge or AnswerJudge()))
            row.update(status="completed")
        row.update(model=answer.model, abstained=answer.abstained, predicted_sql=answer.sql,
                   tool_calls=answer.tool_calls, tool_errors=answer.tool_errors, stop_reason=answer.stop_reason,
                   user_turns=answer.user_turns, input_tokens=answer.input_tokens,
                   output_tokens=answer.output_tokens, cost_usd=answer.cost_usd,
                   value_search=answer.value_search, web_search=answer.web_search,
                   transcript=json.dumps(answer.transcript, default=str))
    except ChatError as exc:
        if raise_transient and exc.transient:
            raise TransientTrialError(str(exc)) from exc
        row.update(status="error", reward=0.0, correct=False, error=f"ChatError: {exc}")
    except Exception as exc:  # noqa: BLE001 - an agent's failure is recorded, the run goes on
        row.update(status="error", reward=0.0, correct=False, error=f"{type(exc).__name__}: {exc}")
    row.update(latency_s=time.perf_counter() - clock, ended_at=datetime.now(UTC))
    return row


def trial_row(agent_name: str, task: EvalTask, trial: int, build_id: str, sandbox: str | None = None) -> dict:
    """The identifying part of a trial's row (also the row of a trial that could not run at all)."""
    view = task.view
    question = view.suite != "dq" and view.suite not in WORKSPACE_SUITES  # answered, not audited or worked
    return {"build_id": build_id, "suite": view.suite, "db": view.db, "task_id": view.task_id, "trial": trial,
            "agent": agent_name, "is_answerable": task.gold.is_answerable if question else None,
            "started_at": datetime.now(UTC), "sandbox": sandbox,
            "protocol": protocol_of(task) if question else None,
            "option_order": order_label(view.option_order),
            "correct_option": task.gold.published_answer if view.qa_format == "multichoice" else None}


def failed_trial_row(agent_name: str, task: EvalTask, trial: int, build_id: str, error: BaseException) -> dict:
    """A trial whose retries ran out (e.g. an endpoint down all along): an error, re-run on resume."""
    row = trial_row(agent_name, task, trial, build_id)
    row.update(status="error", reward=0.0, correct=False, error=f"{type(error).__name__}: {error}",
               ended_at=datetime.now(UTC))
    return row


def _fresh_workspace(task: EvalTask, trial: int, agent_name: str, artifacts: Path) -> Path:
    """The trial's workspace, `<artifacts>/<agent>/<suite>/<task>-<trial>/`, made anew from the task (a resumed
    trial starts over), and kept after the trial for inspection."""
    workspace = artifacts / _folder_name(agent_name) / task.view.suite / f"{task.view.task_id}-{trial}"
    if workspace.exists():
        shutil.rmtree(workspace)
    workspace.parent.mkdir(parents=True, exist_ok=True)
    return family(task.view.suite).prepare(task.gold.workspace_task_dir, workspace)


def _scored(task: EvalTask, answer: AgentAnswer, submission: Path, judge: AnswerJudge) -> dict:
    """The scored fields of a trial: a workspace suite by its family's verifier, dq by its audit scorer, every other
    suite by its task's published protocol (ehrbench.scoring: the gold's protocol, else the suite's)."""
    if task.view.suite in WORKSPACE_SUITES:
        verdict = family(task.view.suite).verify(task.gold.workspace_task_dir, task.view.workspace)
        return {"reward": verdict.reward, "correct": verdict.passed, "workspace_path": str(task.view.workspace),
                "verifier_metrics": json.dumps({**verdict.metrics, "problem": verdict.problem}, default=str)}
    if task.view.suite == "dq":
        submission.parent.mkdir(parents=True, exist_ok=True)
        submission.write_text("table,_row_id\n" + "".join(f"{t},{r}\n" for t, r in answer.flagged_rows or []))
        score = score_task(task.gold.dq_task_dir, submission)
        return {"reward": float(score.passed), "correct": score.passed, "dq_recall": score.recall,
                "dq_precision": score.precision, "flagged_rows_path": str(submission)}
    return score_trial(task, answer, judge=judge)


def _folder_name(agent_name: str) -> str:
    """An agent name as one portable folder name (`llm:qwen@http://host:8000/v1` holds '/' and ':')."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", agent_name).strip("_") or "agent"
