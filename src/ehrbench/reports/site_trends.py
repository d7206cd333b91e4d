"""The trends page (trends.html): each metric across the runs of a series, and the regressions with the interval of
the run before."""

from __future__ import annotations

from collections import defaultdict

from ehrbench.reports import charts
from ehrbench.reports.model import TrendPoint
from ehrbench.reports.site_format import format_interval, format_value
from ehrbench.reports.site_render import Site


def write_trends(site: Site) -> None:
    data = site.data
    runs = data.trend_runs
    enough = len(runs) >= 2
    sections = _trend_sections(site) if enough else []
    regressions = _regressions(site) if enough else []
    site.page("trends.html", "trends.html.j2", "Trends", "trends", runs=runs, enough=enough, sections=sections,
              regressions=regressions)


def _trend_sections(site: Site) -> list[dict]:
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


def _regressions(site: Site) -> list[dict]:
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
