"""The task pages (tasks/<suite>/<task>.html: question, gold answer, every trial with its transcript) and the task
index (tasks/index.html: mean reward per agent)."""

from __future__ import annotations

from collections.abc import Sequence

from ehrbench.reports.model import TaskDetail, TrialDetail
from ehrbench.reports.site_format import QUESTION_PREVIEW_CHARS, format_value, mean, table_columns, truncate
from ehrbench.reports.site_links import task_href
from ehrbench.reports.site_render import Site
from ehrbench.reports.site_transcripts import transcript_view

FOLDED_LIST_ITEMS = 20
_DQ_LABEL_COLUMNS = ("table", "row_id", "cluster_id", "family", "subtype", "role", "field", "original_value",
                     "corrupted_value")


def write_tasks(site: Site) -> None:
    for task in site.data.tasks:
        site.page(task_href(task.suite, task.task_id), "task.html.j2", f"{task.suite} · {task.task_id}", "tasks",
                  task=task, gold=_gold_view(task), trials=_trial_views(site, task))
    _write_task_index(site)


def _write_task_index(site: Site) -> None:
    agents = site.agents(trial.agent for task in site.data.tasks for trial in task.trials)
    groups = []
    for suite in site.suites(task.suite for task in site.data.tasks):
        tasks = [task for task in site.data.tasks if task.suite == suite]
        if tasks:
            groups.append({"suite": suite, "tasks": [_task_index_row(task, agents) for task in tasks]})
    site.page("tasks/index.html", "tasks_index.html.j2", "Tasks", "tasks", groups=groups, agents=agents)


def _task_index_row(task: TaskDetail, agents: Sequence[str]) -> dict:
    rewards = {agent: mean(t.reward for t in task.trials if t.agent == agent) for agent in agents}
    return {"task": task, "question": truncate(task.question, QUESTION_PREVIEW_CHARS), "rewards": rewards}


def _gold_view(task: TaskDetail) -> dict:
    labels = task.gold_dq_labels or []
    return {"labels": labels, "label_columns": table_columns(labels, _DQ_LABEL_COLUMNS),
            "labels_open": len(labels) <= FOLDED_LIST_ITEMS, "fhir_open": len(task.gold_fhir_ids) <= FOLDED_LIST_ITEMS}


def _trial_views(site: Site, task: TaskDetail) -> list[dict]:
    rank = {agent: i for i, agent in enumerate(site.agents(t.agent for t in task.trials))}
    trials = sorted(task.trials, key=lambda t: (rank[t.agent], t.trial))
    return [{"trial": t, "figures": _trial_figures(t), "messages": transcript_view(t.transcript)} for t in trials]


def _trial_figures(trial: TrialDetail) -> list[tuple[str, str]]:
    """The trial's scores and costs that apply to it (None means the suite does not measure it)."""
    figures = [
        ("Reward", None if trial.reward is None else f"{trial.reward:.3f}"),
        ("Abstained", None if trial.abstained is None else ("yes" if trial.abstained else "no")),
        ("Retrieval precision", _optional(trial.retrieval_precision, "share")),
        ("Retrieval recall", _optional(trial.retrieval_recall, "share")),
        ("DQ recall", _optional(trial.dq_recall, "share")),
        ("DQ precision", _optional(trial.dq_precision, "share")),
        ("Latency", _optional(trial.latency_s, "seconds")),
        ("Input tokens", _optional(trial.input_tokens, "count")),
        ("Output tokens", _optional(trial.output_tokens, "count")),
        ("Cost", _optional(trial.cost_usd, "usd")),
        ("Tool calls", _optional(trial.tool_calls, "count")),
        ("User turns", _optional(trial.user_turns, "count")),
        ("Stop reason", trial.stop_reason),
    ]
    return [(label, text) for label, text in figures if label == "Reward" or text is not None]


def _optional(value: float | None, scale: str) -> str | None:
    return None if value is None else format_value(value, scale)
