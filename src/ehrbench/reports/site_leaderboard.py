"""The leaderboard (index.html: one table and chart per suite) and the failing-tasks pages its rows link
(failures/<agent>--<suite>.html)."""

from __future__ import annotations

from collections.abc import Sequence

from ehrbench.reports import aggregates, charts
from ehrbench.reports.model import Estimate, FailingTask, LeaderboardRow, Metric, ReportData
from ehrbench.reports.site_format import QUESTION_PREVIEW_CHARS, data_value, format_interval, format_value, truncate
from ehrbench.reports.site_links import failures_href, task_href
from ehrbench.reports.site_render import Site


def failure_page_pairs(data: ReportData) -> set[tuple[str, str]]:
    """Every (agent, suite) with a failing-tasks page: those with a list, and those whose leaderboard row links one
    (so no link dangles even if a list was not collected)."""
    linked = {(row.agent, suite) for suite, rows in data.leaderboard.items() for row in rows if row.failing_tasks > 0}
    return set(data.failing) | linked


def write_leaderboard(site: Site, failure_pages: set[tuple[str, str]]) -> None:
    data = site.data
    sections = [_leaderboard_section(site, suite, failure_pages) for suite in site.suites(data.leaderboard)]
    site.page("index.html", "index.html.j2", "Leaderboard", "leaderboard", sections=sections,
              bootstrap=data.bootstrap)


def leaderboard_columns(metrics: Sequence[Metric], headline: str | None) -> list[Metric]:
    """A suite's metric columns in reading order: the headline, cost and latency per trial (so they stay in view
    beside the sticky agent column however wide the table), then the others in the suite's order."""
    first = [headline, aggregates.COST.key, aggregates.LATENCY.key]
    return sorted(metrics, key=lambda m: first.index(m.key) if m.key in first else len(first))


def _leaderboard_section(site: Site, suite: str, failure_pages: set[tuple[str, str]]) -> dict:
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


def write_failures(site: Site, failure_pages: set[tuple[str, str]], task_pages: set[tuple[str, str]]) -> None:
    counts = {(row.agent, suite): row.failing_tasks for suite, rows in site.data.leaderboard.items() for row in rows}
    for agent, suite in sorted(failure_pages):
        tasks = site.data.failing.get((agent, suite), [])
        site.page(failures_href(agent, suite), "failures.html.j2", f"Failing tasks — {agent} on {suite}",
                  "leaderboard", agent=agent, suite=suite, expected=counts.get((agent, suite)),
                  tasks=[_failing_row(task, suite, task_pages) for task in tasks])


def _failing_row(task: FailingTask, suite: str, task_pages: set[tuple[str, str]]) -> dict:
    return {"task": task, "question": truncate(task.question, QUESTION_PREVIEW_CHARS),
            "href": task_href(suite, task.task_id) if (suite, task.task_id) in task_pages else None}
