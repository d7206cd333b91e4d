"""evaluate-agents: agents on the suites of a build, k trials each, one mapped task per (agent, task, trial).

    parse the agents (oracle, abstain, LLM agents with their options) → load the build's tasks (a seeded `limit` per
    suite) and those of the imported task sets (ehrbench.tasksets: each in its agent suite, ids `<task set>/<id>`)
    → resume: skip the trials this run id already completed
      → plan the run (ehrbench.evaluation.plan): the agents, with API keys kept in Prefect Secret blocks and their
        code's sandbox; the trials to run, in batches of one agent; one global concurrency limit per model endpoint
        (trials in flight against it: flows/endpoint_slots.py)
      → per agent, its endpoint's slots held once (flows/trial_batches.py); per batch: map run-trial over (agent,
        task, trial) — on local threads, or on a Dask cluster (`dask_address`);
        a trial stopped by a transient endpoint failure is retried, one that still fails is recorded as an error
        (flows/trial_batches.py) → write the batch as one parquet part
      → metric table (ehrbench.evaluation.report; per task set apart from the generated suites) as a Prefect artifact
      → with a run prefix (the nightly deployment's), the comparison with the previous run of that prefix: metric
        changes and tasks that flipped (ehrbench.reports.compare) as a second artifact
      → the run's dashboard (flows/report.py: leaderboards with intervals, breakdowns, trends of the run's series with
        regressions flagged, transcripts) rendered to reports/site/ and linked as an artifact → the run's summary

Results: data/results/run_id=<id>/part-*.parquet (DuckDB, pandas and polars read the folder). Every trial spills its
row the moment it ends; re-running with the same run id resumes: spilled rows become a part, completed trials are
skipped — a killed run loses at most the trials in flight.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from itertools import groupby
from operator import attrgetter
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.blocks.system import Secret
from prefect.runtime import flow_run

from ehrbench.agents.config import BASELINES, parse_agents
from ehrbench.errors import ConfigError, EhrbenchError
from ehrbench.evaluation.plan import TrialKey, plan_run
from ehrbench.evaluation.results import ResultStore
from ehrbench.evaluation.summary import (
    COMPARISON_ARTIFACT,
    METRICS_ARTIFACT,
    SUMMARY_ARTIFACT,
    rounded,
    summary_markdown,
)
from ehrbench.evaluation.tally import TrialTally
from ehrbench.evaluation.tasks import load_tasks
from ehrbench.evaluation.taskset_metrics import metric_table_by_taskset
from ehrbench.layout import BuildLayout, DataLayout
from ehrbench.parameter_errors import one_line_errors
from ehrbench.reports.compare import compare_runs, comparison_markdown, previous_run
from ehrbench.settings import EvaluationParameters, default_data_dir
from flows.endpoint_slots import upsert_endpoint_limits
from flows.prefect_api import (
    announce,
    artifact_url,
    is_transient_api_error,
    markdown_artifact,
    subflows_without_heartbeats,
    table_artifact,
    with_api_retries,
)
from flows.report import render_report
from flows.trial_batches import held_for_batches, run_batch, trial_task

ANNOUNCE_S = 30.0  # how often the run's logs say how far the trials are


@flow(name="evaluate-agents", log_prints=True)
def evaluate_agents(
    build: str = "latest",
    suites: list[str] | None = None,
    agents: list[str | dict] = list(BASELINES),  # noqa: B006 - Prefect parameters are copied per run
    agent_options: dict | None = None,
    trials: int = 1,
    limit: int | None = None,
    run_id: str | None = None,
    run_prefix: str = "",
    seed: int = 0,
    batch_size: int = 200,
    concurrency_per_endpoint: int = 4,
    transient_retries: int = 2,
    retry_delay_s: float = 30.0,
    judge_model: str | None = None,
    judge_votes: int = 1,
    dask_address: str | None = None,
    report: bool = True,
    report_dir: str | None = None,
    data_dir: str | None = None,
    unsafe_sandbox: bool = False,
    tasksets: list[str] | None = None,
) -> str:
    """Evaluate `agents` on `suites` of `build` (default: every suite, or none when `tasksets` are given) and on the
    imported `tasksets` (`ehrbench tasks import`; each must have been imported against `build`) with `trials` trials
    per task; `limit`: tasks per suite and per task set (a seeded sample). An agent is `oracle`, `abstain`, an LLM
    spec (`llm:<model>@<base_url>`, `llm:openai:<model>`, `llm:gemini:<model>`; `agent_options` apply to these) or a
    mapping {name, model, options}. Without `run_id` the run is named `<run_prefix><UTC time>` and, when an earlier
    run of that prefix exists (the nightly schedule's), compared with it. With `report`, the run's dashboard is
    rendered into `report_dir` (default reports/site/). LLM agents' SQL and Python run under bubblewrap; where it
    cannot run the flow stops, unless `unsafe_sandbox` (then every row records "unsafe: <why>"). Returns the run's
    results folder."""
    with one_line_errors(EvaluationParameters):  # out of range: one line naming the parameter, before any trial
        parameters = EvaluationParameters(
            suites=suites, tasksets=tasksets or [], agents=agents, trials=trials, limit=limit, seed=seed,
            run_id=run_id, run_prefix=run_prefix, batch_size=batch_size,
            concurrency_per_endpoint=concurrency_per_endpoint, transient_retries=transient_retries,
            retry_delay_s=retry_delay_s, judge_votes=judge_votes)
    logger = get_run_logger()
    configs = parse_agents(agents, agent_options)
    layout = DataLayout(root=Path(data_dir).resolve() if data_dir else default_data_dir())
    build_dir = layout.build_folder(build).resolve()
    build_id = json.loads(BuildLayout(build_dir).manifest.read_text())["build_id"]
    tasks = load_tasks(build_dir, tuple(parameters.chosen_suites()), limit, seed,
                       tasksets=tuple(layout.taskset(name) for name in parameters.tasksets))
    store = ResultStore(layout.results, run_id or run_prefix + _scheduled_time().strftime("%Y%m%dT%H%M%SZ"))
    completed = _resume(store, build_id)
    # before any trial: a run whose agents' code could not be isolated, or whose secret is missing, stops here
    plan = plan_run(configs, tasks, trials, completed, load_secret=lambda name: Secret.load(name).get(),
                    allow_unsafe_sandbox=unsafe_sandbox)
    if plan.sandbox and plan.sandbox != "bubblewrap":
        logger.warning("agent SQL and Python run WITHOUT the OS sandbox (%s); every result row records it",
                       plan.sandbox)
    upsert_endpoint_limits(plan.limits.values(), concurrency_per_endpoint)
    announce(f"run {store.run_id} on build {build_id}: {plan.describe()}")
    run_one = trial_task.with_options(retries=transient_retries, retry_delay_seconds=retry_delay_s)
    tally = TrialTally(len(plan.pending), log=lambda count: logger.info(count.describe()), log_every_s=ANNOUNCE_S)
    for limit, batches in groupby(plan.batches(batch_size), key=attrgetter("limit")):  # an agent's endpoint
        with held_for_batches(limit, concurrency_per_endpoint, store, dask_address) as threads:
            for batch in batches:
                store.write(run_batch(run_one, batch, build_id, store, (judge_model, judge_votes), threads,
                                      dask_address, tally))
    announce(f"trials done: {tally.describe()}; results in {store.folder}")
    table_artifact(key=METRICS_ARTIFACT, table=[rounded(row) for row in metric_table_by_taskset(store.folder)],
                   description=f"Metrics of run {store.run_id} on build {build_id}")
    previous = previous_run(layout.results, store.run_id, run_prefix) if run_prefix else None
    if previous is not None:
        comparison = compare_runs(store.folder, previous)
        announce(f"compared with {comparison.previous_run}: {len(comparison.metric_changes)} metrics changed, "
                 f"{len(comparison.flipped_tasks)} tasks flipped")
        markdown_artifact(key=COMPARISON_ARTIFACT, markdown=comparison_markdown(comparison, store.run_id),
                          description="Metric changes and flipped tasks since the previous run")
    dashboard = _render_dashboard(store, run_prefix, report_dir, layout.root) if report else None
    if dashboard:  # the subflow announced it; the run's own logs (`ehrbench follow`, --watch) say it too
        logger.info("dashboard: %s", dashboard)
    markdown_artifact(key=SUMMARY_ARTIFACT, description=f"Run {store.run_id}: what ran and where to look",
                      markdown=summary_markdown(store, build_id, plan, tally, dashboard, compared=previous is not None,
                                                artifact_url=artifact_url))
    announce(f"next: uv run ehrbench metrics --run-id {store.run_id}"
             + ("" if report else f"; make report RUN_ID={store.run_id}  # the dashboard"))
    return str(store.folder)


def _resume(store: ResultStore, build_id: str) -> set[TrialKey]:
    """The trials earlier runs of this run id completed: rows a killed run spilled become a part first; files that
    are no trial part are set aside (their trials run again). A run made on another build is not resumed."""
    logger = get_run_logger()
    set_aside_before = _files_in(store.quarantine)
    recovered = store.recover()  # rows a killed run of this id spilled
    if recovered:
        logger.info("recovered the trials an interrupted run finished into %s", recovered.name)
    earlier = store.builds() - {build_id}
    if earlier:  # a run mixing builds would compare answers to different gold
        raise ConfigError(f"run {store.run_id} was made on build {', '.join(sorted(earlier))}, not {build_id}; "
                         f"resume it with --build {sorted(earlier)[0]} or start a new run id")
    completed = store.completed()
    if set_aside := sorted(_files_in(store.quarantine) - set_aside_before):  # in the run's own log, not only Python's
        logger.warning("moved %d unreadable result file(s) to %s; their trials run again: %s", len(set_aside),
                       store.quarantine, ", ".join(set_aside))
    return completed


def _files_in(folder: Path) -> set[str]:
    return {path.name for path in folder.iterdir()} if folder.is_dir() else set()


def _scheduled_time() -> datetime:
    """When this flow run was due: the default run id's time. A retry of the flow run keeps it, so the retry
    resumes the same run (completed trials skipped) instead of starting over."""
    expected = flow_run.scheduled_start_time
    return expected.astimezone(UTC) if expected else datetime.now(UTC)


def _render_dashboard(store: ResultStore, run_prefix: str, report_dir: str | None, data_dir: Path) -> str:
    """The last stage. Its inputs are the run's parquet parts, complete by now, so when the Prefect API keeps
    failing the run's results stand and only the dashboard is missing; the flow fails and says how to finish it."""
    try:
        with subflows_without_heartbeats():
            return with_api_retries(render_report, run_id=store.run_id, trend_prefix=run_prefix or None,
                                    report_dir=report_dir, data_dir=str(data_dir),
                                    what="the dashboard stage (render-report)")
    except Exception as exc:
        if not is_transient_api_error(exc):
            raise
        raise DashboardNotRendered(
            f"the trials of run {store.run_id} are complete in {store.folder}, but its dashboard "
            f"was not rendered: the Prefect API kept failing ({type(exc).__name__}: {str(exc).splitlines()[0]}). "
            f"Render it with `make report RUN_ID={store.run_id}`, or retry this flow run (it resumes run "
            f"{store.run_id}: no trial runs again)") from exc


class DashboardNotRendered(EhrbenchError):
    """The evaluation finished; only its dashboard stage failed."""
