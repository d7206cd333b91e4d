"""render-report: an evaluation run's dashboard — the last stage of evaluate-agents, or on its own.

    the run's parquet parts + its build folder (task facets, gold, manifest, quarantine) + the earlier runs of its
    series → DuckDB aggregation (leaderboard with bootstrap intervals, breakdowns, Pass@k curves, trends with
    regressions, failing tasks, transcripts) → a static site (reports/site/index.html, offline, swapped in whole)
    → Prefect artifacts: a link to the site and the headline table
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from ehrbench.layout import DataLayout
from ehrbench.parameter_errors import one_line_errors
from ehrbench.reports.assemble import report_data
from ehrbench.reports.model import DEFAULT_BOOTSTRAP, Bootstrap
from ehrbench.reports.site import render_site
from ehrbench.reports.summary import headline_markdown
from ehrbench.settings import ReportParameters, default_data_dir, default_report_dir
from ehrbench.stack.static_files import report_link
from flows.prefect_api import announce, link_artifact, markdown_artifact


@flow(name="render-report", log_prints=True)
def render_report(
    run_id: str,
    trend_prefix: str | None = None,
    bootstrap_replicates: int = DEFAULT_BOOTSTRAP.replicates,
    bootstrap_seed: int = DEFAULT_BOOTSTRAP.seed,
    report_dir: str | None = None,
    data_dir: str | None = None,
) -> str:
    """Render run `run_id`'s dashboard into `report_dir` (default reports/site/); `trend_prefix` names the series
    of runs its trends compare (default: the run id without its trailing UTC time). Returns where to open it:
    index.html's URL (http:// when `make server`'s file server serves the site, else file://)."""
    with one_line_errors(ReportParameters):  # out of range: one line naming the parameter
        ReportParameters(bootstrap_replicates=bootstrap_replicates, bootstrap_seed=bootstrap_seed)
    layout = DataLayout(root=Path(data_dir).resolve() if data_dir else default_data_dir())
    bootstrap = Bootstrap(replicates=bootstrap_replicates, seed=bootstrap_seed, level=DEFAULT_BOOTSTRAP.level)
    data = report_data(layout.results, run_id, layout.benchmarks, bootstrap=bootstrap, prefix=trend_prefix)
    site = Path(report_dir).resolve() if report_dir else default_report_dir().resolve()
    index = render_site(data, site,
                        data_docs=layout.build(data.build_id).gx_docs if data.build_id else None)
    regressions = sum(p.change == "regression" and p.run_id == run_id for p in data.trends)
    announce(f"dashboard of run {run_id}: {index} ({len(data.tasks)} tasks, {len(data.trend_runs)} runs in its trend, "
             f"{regressions} regressions)")
    link = report_link(index, site)  # over HTTP when `make server`'s file server serves the site: the UI opens it
    link_artifact(key="evaluation-report", link=link, link_text=f"Dashboard of run {run_id}",
                  description="The run's static report site (open index.html)")
    markdown_artifact(key="evaluation-report-summary", markdown=headline_markdown(data, link),
                      description=f"Headline metrics of run {run_id}")
    return link
