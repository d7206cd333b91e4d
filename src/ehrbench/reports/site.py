"""The static HTML dashboard of an evaluation report: `render_site(data, out)` writes plain pages that work from
file:// and any static host (no CDN, no fetch of data files: everything is embedded), and publishes them atomically
(a reader never sees a half-written site, a failed render leaves the previous one in place).

Layout of a site:

    index.html  breakdowns.html  curves.html  trends.html  build.html
    assets/plotly.min.js  assets/style.css
    failures/<page_name(agent)>--<suite>.html
    tasks/index.html  tasks/<suite>/<page_name(task_id)>.html
    gx/  (the build's Great Expectations Data Docs, when given)
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import shutil
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from plotly.offline import get_plotlyjs

from ehrbench.reports import aggregates, charts
from ehrbench.reports.model import (
    BreakdownRow,
    BuildInfo,
    Estimate,
    FailingTask,
    LeaderboardRow,
    Metric,
    ReportData,
    TaskDetail,
    TrendPoint,
    TrialDetail,
)

TEMPLATES_DIR = Path(__file__).parent / "templates"
DATA_DOCS_DIR = "gx"  # where the build's GX Data Docs go in the site
FACET_LABELS = {
    "category": "Question category",
    "template": "Template",
    "time_expression": "Time expression",
    "database": "Database",
    "task_type": "chatqa task type (IncreQA / AdaptQA)",
    "fhir_resource_type": "FHIR resource type",
    "dq_family": "DQ family",
    "dq_variant": "DQ variant",
}
BREAKDOWN_CHART_VALUES = 30  # beyond this many values (templates: 150+) a chart shows only the worst ones
QUESTION_PREVIEW_CHARS = 160
TOOL_RESULT_CHARS = 4_000
FOLDED_JSON_CHARS = 1_500  # pretty JSON longer than this starts folded
FOLDED_LIST_ITEMS = 20
# Transcript fields shown as such; anything else in an entry is shown as JSON.
_MESSAGE_FIELDS = {"role", "content", "tool_calls", "tool_call_id", "name", "user_attempts"}
_DQ_LABEL_COLUMNS = ("table", "row_id", "cluster_id", "family", "subtype", "role", "field", "original_value",
                     "corrupted_value")
_QUARANTINE_COLUMNS = ("question_id", "suite", "db", "template_id", "failed_expectations")


# ---------------------------------------------------------------------------------------------- names and values


def page_name(text: str) -> str:
    """A filesystem-safe page name; the hash keeps names apart that sanitise alike (`llm:m@http://h/v1` and
    `llm_m_http_h_v1`)."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:60]
    return f"{readable}-{hashlib.sha1(text.encode('utf-8')).hexdigest()[:8]}"


def failures_href(agent: str, suite: str) -> str:
    """The failing-tasks page of an agent on a suite, relative to the site root."""
    return f"failures/{page_name(agent)}--{suite}.html"


def task_href(suite: str, task_id: str) -> str:
    """A task's page, relative to the site root."""
    return f"tasks/{suite}/{page_name(task_id)}.html"


def format_value(value: float | None, scale: str) -> str:
    """A metric value as the tables show it, by `Metric.scale`."""
    if value is None:
        return "—"
    if scale == "share":
        return f"{value * 100:.1f} %"
    if scale == "score":
        return f"{value * 100:.1f}"
    if scale == "usd":
        return f"${value:.4f}"
    if scale == "seconds":
        return f"{value:.2f} s"
    if scale == "count":
        return f"{value:,.0f}"
    return f"{value:.4g}"


def format_interval(estimate: Estimate, scale: str) -> str:
    """`[lo, hi]`, or empty when the estimate has no interval."""
    if estimate.low is None or estimate.high is None:
        return ""
    return f"[{format_value(estimate.low, scale)}, {format_value(estimate.high, scale)}]"


def data_value(value: float | None) -> str:
    """The machine-readable value of a cell (data-value)."""
    return "" if value is None else str(round(value, 6))


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def truncate(text: str | None, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


# ------------------------------------------------------------------------------------------------ publication


def render_site(data: ReportData, out: Path, data_docs: Path | None = None) -> Path:
    """Render the report into `out` (replaced whole) and return the path of its index.html.

    `data_docs` is the build's Great Expectations Data Docs folder, copied into the site as `gx/` (where
    `data.build.data_docs` points): anything put into `out` beforehand would be lost when the new site is swapped in.
    A folder that does not exist is skipped, and the build page then says the Data Docs are not in the site."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}-{secrets.token_hex(6)}"
    staging.mkdir()
    try:
        if data_docs is not None and Path(data_docs).is_dir():
            shutil.copytree(data_docs, staging / DATA_DOCS_DIR)
        _write_site(data, staging)
        _swap_in(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out / "index.html"


def _swap_in(staging: Path, out: Path) -> None:
    """Replace `out` by `staging` with two renames, so `out` is always either the old site or the new one."""
    if not out.exists() and not out.is_symlink():
        staging.rename(out)
        return
    retired = out.parent / f".{out.name}-old-{secrets.token_hex(6)}"
    out.rename(retired)
    try:
        staging.rename(out)
    except BaseException:
        retired.rename(out)
        raise
    if retired.is_symlink() or retired.is_file():
        retired.unlink()
    else:
        shutil.rmtree(retired, ignore_errors=True)


def _site_relative(path: str) -> PurePosixPath | None:
    """A relative path inside the site, or None for absolute paths and paths that climb out of it."""
    relative = PurePosixPath(path.replace("\\", "/"))
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        return None
    return relative


# ---------------------------------------------------------------------------------------------------- writing


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES_DIR), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.globals.update(failures_href=failures_href, task_href=task_href, fmt=format_value,
                       interval=format_interval, data_value=data_value, pretty_json=pretty_json)
    env.filters.update(plain=_plain, truncate_text=truncate)
    return env


def _plain(value: Any) -> str:
    """A cell of a manifest table: thousands separators for integers, lists of names joined, other lists as JSON."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return ", ".join(value)
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


@dataclass
class _Site:
    data: ReportData
    root: Path
    env: Environment
    colors: dict[str, str]

    def page(self, relative: str, template: str, title: str, section: str, **context: Any) -> None:
        """Render one page; `root` is the way back to the site root, so every link stays relative."""
        html = self.env.get_template(template).render(
            root="../" * relative.count("/"), title=title, section=section, run_id=self.data.run_id,
            build_id=self.data.build_id, generated_at=self.data.generated_at, **context)
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")

    def agents(self, seen: Iterable[str] = ()) -> list[str]:
        """The report's agents in its order, then any others the rows mention."""
        return list(dict.fromkeys([*self.data.agents, *seen]))

    def suites(self, seen: Iterable[str] = ()) -> list[str]:
        return list(dict.fromkeys([*self.data.suites, *seen]))

    def metric(self, suite: str, key: str) -> Metric:
        for metric in self.data.metrics.get(suite, []):
            if metric.key == key:
                return metric
        return Metric(key=key, label=key, scale="")


def _write_site(data: ReportData, root: Path) -> None:
    site = _Site(data=data, root=root, env=_environment(), colors=charts.agent_colors(_all_agents(data)))
    _write_assets(root)
    task_pages = {(task.suite, task.task_id) for task in data.tasks}
    failure_pages = _failure_pages(data)
    _write_leaderboard(site, failure_pages)
    _write_breakdowns(site)
    _write_curves(site)
    _write_trends(site)
    _write_build(site)
    _write_failures(site, failure_pages, task_pages)
    _write_tasks(site)


def _all_agents(data: ReportData) -> list[str]:
    seen = [row.agent for rows in data.leaderboard.values() for row in rows]
    return list(dict.fromkeys([*data.agents, *seen, *(p.agent for p in data.trends)]))


def _write_assets(root: Path) -> None:
    assets = root / "assets"
    assets.mkdir()
    (assets / "plotly.min.js").write_text(get_plotlyjs(), encoding="utf-8")
    shutil.copy2(TEMPLATES_DIR / "style.css", assets / "style.css")


def _failure_pages(data: ReportData) -> set[tuple[str, str]]:
    """Every (agent, suite) with a failing-tasks page: those with a list, and those whose leaderboard row links one
    (so no link dangles even if a list was not collected)."""
    linked = {(row.agent, suite) for suite, rows in data.leaderboard.items() for row in rows if row.failing_tasks > 0}
    return set(data.failing) | linked


# ------------------------------------------------------------------------------------------------ leaderboard


def _write_leaderboard(site: _Site, failure_pages: set[tuple[str, str]]) -> None:
    data = site.data
    sections = [_leaderboard_section(site, suite, failure_pages) for suite in site.suites(data.leaderboard)]
    site.page("index.html", "index.html.j2", "Leaderboard", "leaderboard", sections=sections,
              bootstrap=data.bootstrap)


def leaderboard_columns(metrics: Sequence[Metric], headline: str | None) -> list[Metric]:
    """A suite's metric columns in reading order: the headline, cost and latency per trial (so they stay in view
    beside the sticky agent column however wide the table), then the others in the suite's order."""
    first = [headline, aggregates.COST.key, aggregates.LATENCY.key]
    return sorted(metrics, key=lambda m: first.index(m.key) if m.key in first else len(first))


def _leaderboard_section(site: _Site, suite: str, failure_pages: set[tuple[str, str]]) -> dict:
    headline_key = site.data.headline.get(suite)
    metrics = leaderboard_columns(site.data.metrics.get(suite, []), headline_key)
    rows = site.data.leaderboard.get(suite, [])
    headline = next((m for m in metrics if m.key == headline_key), None)
    chart = charts.leaderboard_chart(suite, rows, headline, site.colors) if rows and headline else None
    return {"suite": suite, "metrics": metrics, "headline": headline_key, "chart": chart,
            "rows": [_leaderboard_row(row, suite, metrics, failure_pages) for row in rows]}


def _leaderboard_row(row: LeaderboardRow, suite: str, metrics: Sequence[Metric],
                     failure_pages: set[tuple[str, str]]) -> dict:
    linked = row.failing_tasks > 0 and (row.agent, suite) in failure_pages
    cells = []
    for metric in metrics:
        estimate = row.values.get(metric.key, Estimate(None))
        cells.append({"metric": metric, "data_value": data_value(estimate.value),
                      "text": format_value(estimate.value, metric.scale),
                      "ci": format_interval(estimate, metric.scale)})
    return {"row": row, "failures": failures_href(row.agent, suite) if linked else None, "cells": cells}


# ------------------------------------------------------------------------------------------------- breakdowns


def _facet_order(facets: Iterable[str]) -> list[str]:
    present = set(facets)
    return [f for f in FACET_LABELS if f in present] + sorted(present - set(FACET_LABELS))


def _write_breakdowns(site: _Site) -> None:
    groups: dict[tuple[str, str], list[BreakdownRow]] = defaultdict(list)
    for row in site.data.breakdowns:
        groups[(row.facet, row.suite)].append(row)
    suites = site.suites(suite for _, suite in groups)
    sections = [_breakdown_section(site, facet, suite, groups[(facet, suite)])
                for facet in _facet_order(facet for facet, _ in groups) for suite in suites if (facet, suite) in groups]
    site.page("breakdowns.html", "breakdowns.html.j2", "Breakdowns", "breakdowns", sections=sections,
              chart_values=BREAKDOWN_CHART_VALUES)


def _rate(row: BreakdownRow) -> float:
    return row.success_rate.value if row.success_rate.value is not None else float("inf")


def _breakdown_section(site: _Site, facet: str, suite: str, rows: list[BreakdownRow]) -> dict:
    agents = site.agents(row.agent for row in rows)
    agent_rank = {agent: i for i, agent in enumerate(agents)}
    # A value's place is its mean success over agents: the worst values first, in the chart and the table.
    rates_by_value: dict[str, list[float | None]] = defaultdict(list)
    for row in rows:
        rates_by_value[row.value].append(row.success_rate.value)
    value_rate = {value: _mean(rates) for value, rates in rates_by_value.items()}
    values = sorted(value_rate, key=lambda v: (value_rate[v] if value_rate[v] is not None else float("inf"), v))
    limited = len(values) > BREAKDOWN_CHART_VALUES
    if limited:
        table_rows = sorted(rows, key=lambda r: (_rate(r), r.value, agent_rank[r.agent]))
    else:
        value_rank = {value: i for i, value in enumerate(values)}
        table_rows = sorted(rows, key=lambda r: (value_rank[r.value], agent_rank[r.agent]))
    label = FACET_LABELS.get(facet, facet)
    chart_values = values[:BREAKDOWN_CHART_VALUES]
    x_title = f"{label}: the {len(chart_values)} worst of {len(values)} values" if limited else label
    chart = charts.breakdown_chart(facet, suite, rows, chart_values, agents, site.colors, x_title)
    return {"facet": facet, "label": label, "suite": suite, "chart": chart, "rows": table_rows,
            "limited": limited, "value_count": len(values)}


# ----------------------------------------------------------------------------------------------------- curves


def _write_curves(site: _Site) -> None:
    points = site.data.pass_curves
    sections = []
    for suite in site.suites(p.suite for p in points):
        mine = [p for p in points if p.suite == suite]
        if not mine:
            continue
        agents = site.agents(p.agent for p in mine)
        rank = {agent: i for i, agent in enumerate(agents)}
        sections.append({"suite": suite, "chart": charts.pass_curve_chart(suite, mine, agents, site.colors),
                         "points": sorted(mine, key=lambda p: (rank[p.agent], p.k))})
    site.page("curves.html", "curves.html.j2", "Pass@k curves", "curves", sections=sections)


# ----------------------------------------------------------------------------------------------------- trends


def _write_trends(site: _Site) -> None:
    data = site.data
    runs = data.trend_runs
    enough = len(runs) >= 2
    sections = _trend_sections(site) if enough else []
    regressions = _regressions(site) if enough else []
    site.page("trends.html", "trends.html.j2", "Trends", "trends", runs=runs, enough=enough, sections=sections,
              regressions=regressions)


def _trend_sections(site: _Site) -> list[dict]:
    groups: dict[tuple[str, str], list[TrendPoint]] = defaultdict(list)
    for point in site.data.trends:
        groups[(point.suite, point.metric)].append(point)
    sections = []
    for suite in site.suites(suite for suite, _ in groups):
        known = [m.key for m in site.data.metrics.get(suite, [])]
        keys = [k for k in known if (suite, k) in groups] + sorted(
            k for s, k in groups if s == suite and k not in known)
        for key in keys:
            points = groups[(suite, key)]
            metric = site.metric(suite, key)
            agents = site.agents(p.agent for p in points)
            sections.append({"suite": suite, "metric": metric,
                             "chart": charts.trend_chart(suite, metric, points, site.data.trend_runs, agents,
                                                         site.colors)})
    return sections


def _regressions(site: _Site) -> list[dict]:
    """Every regression with the interval of the previous run it fell out of."""
    order = {run: i for i, run in enumerate(site.data.trend_runs)}
    series: dict[tuple[str, str, str], list[TrendPoint]] = defaultdict(list)
    for point in site.data.trends:
        if point.run_id in order:
            series[(point.agent, point.suite, point.metric)].append(point)
    found = []
    for points in series.values():
        points.sort(key=lambda p: order[p.run_id])
        for previous, point in zip([None, *points], points, strict=False):
            if point.change != "regression":
                continue
            metric = site.metric(point.suite, point.metric)
            found.append({"point": point, "metric": metric, "previous": previous,
                          "value": f"{format_value(point.estimate.value, metric.scale)} "
                                   f"{format_interval(point.estimate, metric.scale)}".strip(),
                          "previous_interval": format_interval(previous.estimate, metric.scale) if previous else ""})
    agent_rank = {agent: i for i, agent in enumerate(site.agents(p["point"].agent for p in found))}
    return sorted(found, key=lambda f: (order[f["point"].run_id], agent_rank[f["point"].agent], f["point"].suite))


# ------------------------------------------------------------------------------------------------------ build


def _write_build(site: _Site) -> None:
    build = site.data.build
    view = _build_view(build, site.root) if build is not None else None
    site.page("build.html", "build.html.j2", "Build", "build", build=view)


def _build_view(build: BuildInfo, root: Path) -> dict:
    manifest = build.manifest or {}
    stages = {name: float(stage["seconds"]) for name, stage in (manifest.get("stages") or {}).items()
              if isinstance(stage, dict) and isinstance(stage.get("seconds"), int | float)}
    shown = {"build_id", "created_at", "finished_at", "parameters", "seed", "sources", "packages", "inputs",
             "raw_row_counts", "built_row_counts", "validation", "questions", "dq", "stages"}
    return {
        "build_id": build.build_id,
        "manifest": manifest,
        "parameters": pretty_json(manifest.get("parameters", {})),
        "inputs": [_input_row(item) for item in manifest.get("inputs") or [] if isinstance(item, dict)],
        "row_counts": [(title, manifest.get(key)) for title, key in
                       (("Raw rows", "raw_row_counts"), ("Built rows", "built_row_counts")) if manifest.get(key)],
        "json_sections": [_json_section(title, manifest.get(key)) for key, title in
                          (("validation", "Validation"), ("questions", "Questions"), ("dq", "DQ tasks"))
                          if manifest.get(key)],
        "other_sections": [_json_section(key, value) for key, value in manifest.items()
                           if key not in shown and value not in (None, {}, [])],
        "stages": stages,
        "stages_chart": charts.build_stages_chart(stages) if stages else None,
        "quarantine": build.quarantine or [],
        "quarantine_columns": _columns(build.quarantine or [], _QUARANTINE_COLUMNS),
        "data_docs": build.data_docs,
        "data_docs_href": _data_docs_href(build.data_docs, root),
    }


def _input_row(item: dict) -> dict:
    sha = item.get("sha256") or ""
    return {"dataset": item.get("dataset", ""), "table": item.get("table", ""), "status": item.get("status", ""),
            "verification": item.get("verification", ""), "rows": item.get("rows"), "sha256": sha,
            "sha256_short": sha[:12]}


def _json_section(title: str, value: Any) -> dict:
    text = pretty_json(value)
    return {"title": title, "json": text, "open": len(text) <= FOLDED_JSON_CHARS}


def _data_docs_href(data_docs: str | None, root: Path) -> str | None:
    """A link to the Data Docs only if they are really in the site (a dangling link is worse than none)."""
    relative = _site_relative(data_docs) if data_docs else None
    if relative is None:
        return None
    target = root / relative
    if target.is_dir() and (target / "index.html").is_file():
        return f"{relative}/index.html"
    return str(relative) if target.is_file() else None


def _columns(rows: Sequence[dict], preferred: Sequence[str]) -> list[str]:
    """The preferred columns first, then any other key the rows have."""
    keys = dict.fromkeys(key for row in rows for key in row)
    return [c for c in preferred if c in keys] + [k for k in keys if k not in preferred]


# --------------------------------------------------------------------------------------------------- failures


def _write_failures(site: _Site, failure_pages: set[tuple[str, str]], task_pages: set[tuple[str, str]]) -> None:
    counts = {(row.agent, suite): row.failing_tasks for suite, rows in site.data.leaderboard.items() for row in rows}
    for agent, suite in sorted(failure_pages):
        tasks = site.data.failing.get((agent, suite), [])
        site.page(failures_href(agent, suite), "failures.html.j2", f"Failing tasks — {agent} on {suite}",
                  "leaderboard", agent=agent, suite=suite, expected=counts.get((agent, suite)),
                  tasks=[_failing_row(task, suite, task_pages) for task in tasks])


def _failing_row(task: FailingTask, suite: str, task_pages: set[tuple[str, str]]) -> dict:
    return {"task": task, "question": truncate(task.question, QUESTION_PREVIEW_CHARS),
            "href": task_href(suite, task.task_id) if (suite, task.task_id) in task_pages else None}


# ------------------------------------------------------------------------------------------------------ tasks


def _write_tasks(site: _Site) -> None:
    for task in site.data.tasks:
        site.page(task_href(task.suite, task.task_id), "task.html.j2", f"{task.suite} · {task.task_id}", "tasks",
                  task=task, gold=_gold_view(task), trials=_trial_views(site, task))
    _write_task_index(site)


def _write_task_index(site: _Site) -> None:
    agents = site.agents(trial.agent for task in site.data.tasks for trial in task.trials)
    groups = []
    for suite in site.suites(task.suite for task in site.data.tasks):
        tasks = [task for task in site.data.tasks if task.suite == suite]
        if tasks:
            groups.append({"suite": suite, "tasks": [_task_index_row(task, agents) for task in tasks]})
    site.page("tasks/index.html", "tasks_index.html.j2", "Tasks", "tasks", groups=groups, agents=agents)


def _task_index_row(task: TaskDetail, agents: Sequence[str]) -> dict:
    rewards = {agent: _mean(t.reward for t in task.trials if t.agent == agent) for agent in agents}
    return {"task": task, "question": truncate(task.question, QUESTION_PREVIEW_CHARS), "rewards": rewards}


def _gold_view(task: TaskDetail) -> dict:
    labels = task.gold_dq_labels or []
    return {"labels": labels, "label_columns": _columns(labels, _DQ_LABEL_COLUMNS),
            "labels_open": len(labels) <= FOLDED_LIST_ITEMS, "fhir_open": len(task.gold_fhir_ids) <= FOLDED_LIST_ITEMS}


def _trial_views(site: _Site, task: TaskDetail) -> list[dict]:
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


# ------------------------------------------------------------------------------------------------- transcripts


def transcript_view(entries: Sequence[Any]) -> list[dict]:
    """A transcript as the task page shows it: per entry its role, text, tool calls, the call a tool result answers,
    the simulated user's attempts (harness entries) and any other field as JSON."""
    call_names: dict[str, str] = {}
    return [_message_view(entry, call_names) for entry in entries]


def _message_view(entry: Any, call_names: dict[str, str]) -> dict:
    if not isinstance(entry, dict):
        return _message(role="unknown", extra=pretty_json(entry))
    calls = [_tool_call_view(call) for call in entry.get("tool_calls") or []]
    call_names.update((call["id"], call["name"]) for call in calls if call["id"])
    content = _content_text(entry.get("content"))
    answers = None
    omitted = 0
    if entry.get("tool_call_id") is not None:
        call_id = str(entry["tool_call_id"])
        answers = {"id": call_id, "name": call_names.get(call_id) or entry.get("name") or "?"}
        if content is not None and len(content) > TOOL_RESULT_CHARS:
            content, omitted = content[:TOOL_RESULT_CHARS], len(content) - TOOL_RESULT_CHARS
    attempts = entry.get("user_attempts")
    extra = {key: value for key, value in entry.items() if key not in _MESSAGE_FIELDS}
    if attempts is not None and not isinstance(attempts, list):
        extra["user_attempts"], attempts = attempts, None
    return _message(role=str(entry.get("role") or "unknown"), name=entry.get("name"), content=content,
                    tool_calls=calls, answers=answers, omitted=omitted,
                    attempts=[_attempt_view(i, a) for i, a in enumerate(attempts or [], start=1)],
                    extra=pretty_json(extra) if extra else None)


def _message(role: str, name: str | None = None, content: str | None = None, tool_calls: list | None = None,
             answers: dict | None = None, omitted: int = 0, attempts: list | None = None,
             extra: str | None = None) -> dict:
    return {"role": role, "name": name, "content": content, "tool_calls": tool_calls or [], "answers": answers,
            "omitted": omitted, "attempts": attempts or [], "extra": extra}


def _content_text(content: Any) -> str | None:
    """Message content as text: strings as they are, OpenAI text parts joined, anything else as JSON."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "\n".join(str(p.get("text", "")) for p in content)
    return pretty_json(content)


def _tool_call_view(call: Any) -> dict:
    if not isinstance(call, dict):
        return {"id": "", "name": "?", "arguments": pretty_json(call)}
    function = call.get("function") or {}
    return {"id": str(call.get("id") or ""), "name": str(function.get("name") or "?"),
            "arguments": _arguments_text(function.get("arguments"))}


def _arguments_text(arguments: Any) -> str:
    """Arguments are a JSON string in OpenAI's format: pretty-printed when they parse, as sent when not."""
    if isinstance(arguments, str):
        try:
            return pretty_json(json.loads(arguments))
        except ValueError:
            return arguments
    return pretty_json(arguments)


def _attempt_view(number: int, attempt: Any) -> dict:
    if not isinstance(attempt, dict):
        return {"number": number, "valid": None, "validator": None, "messages": [], "extra": pretty_json(attempt)}
    extra = {k: v for k, v in attempt.items() if k not in ("conversation", "valid", "validator")}
    conversation = attempt.get("conversation")
    return {"number": number, "valid": attempt.get("valid"), "validator": attempt.get("validator"),
            "messages": transcript_view(conversation if isinstance(conversation, list) else []),
            "extra": pretty_json(extra) if extra else None}

