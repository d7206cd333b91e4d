"""render-report: an evaluation run's dashboard — the last stage of evaluate-agents, or on its own.

    the run's parquet parts + its build folder (task facets, gold, manifest, quarantine) + the earlier runs of its
    series → DuckDB aggregation (leaderboard with bootstrap intervals, breakdowns, Pass@k curves, trends with
    regressions, failing tasks, transcripts) → a static site (reports/site/index.html, offline, swapped in whole)
    → Prefect artifacts: a link to the site and the headline table
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger
from prefect.artifacts import create_link_artifact, create_markdown_artifact

from ehrbench.reports.assemble import report_data
from ehrbench.reports.model import Bootstrap
from ehrbench.reports.site import render_site
from ehrbench.reports.summary import headline_markdown
from ehrbench.settings import DataLayout, default_data_dir, default_report_dir


@flow(name="render-report", log_prints=True)
def render_report(
    run_id: str,
    trend_prefix: str | None = None,
    bootstrap_replicates: int = 1000,
    bootstrap_seed: int = 0,
    report_dir: str | None = None,
    data_dir: str | None = None,
) -> str:
    """Render run `run_id`'s dashboard into `report_dir` (default reports/site/); `trend_prefix` names the series
    of runs its trends compare (default: the run id without its trailing UTC time). Returns index.html's path."""
    layout = DataLayout(root=Path(data_dir).resolve() if data_dir else default_data_dir())
    bootstrap = Bootstrap(replicates=bootstrap_replicates, seed=bootstrap_seed, level=0.95)
    data = report_data(layout.results, run_id, layout.benchmarks, bootstrap=bootstrap, prefix=trend_prefix)
    index = render_site(data, Path(report_dir).resolve() if report_dir else default_report_dir().resolve(),
                        data_docs=layout.benchmarks / data.build_id / "reports" / "gx" if data.build_id else None)
    regressions = sum(p.change == "regression" and p.run_id == run_id for p in data.trends)
    get_run_logger().info("report of run %s: %s (%d tasks, %d runs in its trend, %d regressions)", run_id, index,
                          len(data.tasks), len(data.trend_runs), regressions)
    create_link_artifact(key="evaluation-report", link=index.as_uri(), link_text=f"Dashboard of run {run_id}",
                         description="The run's static report site (open index.html)")
    create_markdown_artifact(key="evaluation-report-summary", markdown=headline_markdown(data, index.as_uri()),
                             description=f"Headline metrics of run {run_id}")
    return str(index)
