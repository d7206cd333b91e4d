"""What an evaluation run shows a person at its end: the summary of what ran, on what, and where to look (the stage
artifacts, the dashboard, the next command), and the metric table rounded for reading."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from ehrbench.evaluation.plan import RunPlan
from ehrbench.evaluation.results import ResultStore
from ehrbench.evaluation.tally import TrialTally

METRICS_ARTIFACT = "evaluation-metrics"
COMPARISON_ARTIFACT = "evaluation-comparison"  # with the previous run of the run's prefix
DASHBOARD_ARTIFACT = "evaluation-report-summary"  # the dashboard's headline (flows/report.py)
SUMMARY_ARTIFACT = "evaluation-summary"


def summary_markdown(store: ResultStore, build_id: str, plan: RunPlan, tally: TrialTally, dashboard: str | None, *,
                     compared: bool, artifact_url: Callable[[str], str]) -> str:
    """The run's summary, with links (`artifact_url(key)`) to the artifacts it made and to its dashboard."""
    keys = [METRICS_ARTIFACT, *([COMPARISON_ARTIFACT] if compared else []),
            *([DASHBOARD_ARTIFACT] if dashboard else [])]
    by_suite = ", ".join(f"{n} {suite}" for suite, n in sorted(Counter(t.view.suite for t in plan.tasks).items()))
    return "\n".join([
        f"# Evaluation run {store.run_id}", "",
        f"- build: `{build_id}`",
        f"- agents: {', '.join(f'`{agent.name}`' for agent in plan.agents)}",
        f"- tasks: {len(plan.tasks)} ({by_suite}), {plan.trials} trial(s) each",
        f"- trials run now: {tally.describe()}",
        f"- results: `{store.folder}`",
        f"- dashboard: [{dashboard}]({dashboard})" if dashboard else
        f"- dashboard: not rendered; `make report RUN_ID={store.run_id}`",
        "", "## Artifacts", *[f"- [{key}]({artifact_url(key)})" for key in keys],
        "", "## Next", f"- `uv run ehrbench metrics --run-id {store.run_id}`", ""])


def rounded(row: dict, digits: int = 4) -> dict:
    """A metric row with its floats rounded to `digits` decimals."""
    return {k: round(v, digits) if isinstance(v, float) else v for k, v in row.items()}
