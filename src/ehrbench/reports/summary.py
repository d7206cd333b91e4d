"""The headline table of a report as Markdown: what the Prefect artifact beside the link to the site shows."""

from __future__ import annotations

from ehrbench.reports.model import Estimate, Metric, ReportData
from ehrbench.reports.site_format import format_interval, format_value


def formatted(estimate: Estimate, metric: Metric) -> str:
    """A value on its metric's scale, with its interval when it has one (as the site shows it)."""
    return f"{format_value(estimate.value, metric.scale)} {format_interval(estimate, metric.scale)}".strip()


def headline_markdown(data: ReportData, site_link: str) -> str:
    """Per suite: agents by headline metric (with its interval), success rate, trials, errors, cost per trial."""
    level = f"{data.bootstrap.level:.0%}"
    lines = [f"# Evaluation run {data.run_id}", "",
             f"Build `{data.build_id}` · report: [{site_link}]({site_link}) · intervals: {level} bootstrap over "
             f"tasks ({data.bootstrap.replicates} replicates, seed {data.bootstrap.seed})", ""]
    regressions = [p for p in data.trends if p.change == "regression" and p.run_id == data.run_id]
    for suite in data.suites:
        metrics = {m.key: m for m in data.metrics[suite]}
        headline = metrics[data.headline[suite]]
        lines += [f"## {suite}", "", f"| agent | {headline.label} | trials | errors | invalid | cost / trial |",
                  "|---|---|---|---|---|---|"]
        for row in data.leaderboard[suite]:
            lines.append(f"| {row.agent} | {formatted(row.values[headline.key], headline)} | {row.trials} | "
                         f"{row.errors} | {row.invalid} | "
                         f"{formatted(row.values['cost_per_trial'], metrics['cost_per_trial'])} |")
        lines.append("")
    if regressions:
        lines += [f"**{len(regressions)} regression(s) since the previous run:** " + ", ".join(
            f"{p.agent} {p.suite} {p.metric}" for p in regressions[:20]), ""]
    return "\n".join(lines)
