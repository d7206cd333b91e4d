"""The pass@k curves page (curves.html): one chart and table per suite."""

from __future__ import annotations

from ehrbench.reports import charts
from ehrbench.reports.site_render import Site


def write_curves(site: Site) -> None:
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
