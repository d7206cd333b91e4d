"""The breakdowns page (breakdowns.html): success per facet value (category, template, database, ...) and
suite, the worst values first."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ehrbench.reports import charts
from ehrbench.reports.model import BreakdownRow
from ehrbench.reports.site_format import mean
from ehrbench.reports.site_render import Site

FACET_LABELS = {
    "category": "Question category",
    "template": "Template",
    "time_expression": "Time expression",
    "database": "Database",
    "task_type": "chatqa task type (IncreQA / AdaptQA)",
    "fhir_resource_type": "FHIR resource type",
    "dq_family": "DQ family",
    "dq_variant": "DQ variant",
    "noteqa_format": "Note QA format (multiple-choice / open-ended)",
    "noteqa_level": "EHRNoteQA level (notes fit 4k / 8k tokens)",
    "noteqa_notes": "Discharge summaries asked over",
    "notes_source": "Notes (SYNTHETIC: written by ehrbench from structured rows)",
    "noteqa_answer_position": "Note QA multiple-choice: the letter the correct option was shown at (position bias; "
                              "trials after the first shuffle the options)",
}
BREAKDOWN_CHART_VALUES = 30  # beyond this many values (templates: 150+) a chart shows only the worst ones


def _facet_order(facets: Iterable[str]) -> list[str]:
    present = set(facets)
    return [f for f in FACET_LABELS if f in present] + sorted(present - set(FACET_LABELS))


def write_breakdowns(site: Site) -> None:
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


def _breakdown_section(site: Site, facet: str, suite: str, rows: list[BreakdownRow]) -> dict:
    agents = site.agents(row.agent for row in rows)
    agent_rank = {agent: i for i, agent in enumerate(agents)}
    # A value's place is its mean success over agents: the worst values first, in the chart and the table.
    rates_by_value: dict[str, list[float | None]] = defaultdict(list)
    for row in rows:
        rates_by_value[row.value].append(row.success_rate.value)
    value_rate = {value: mean(rates) for value, rates in rates_by_value.items()}
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
