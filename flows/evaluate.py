"""evaluate-agents: agents on the suites of a build, k trials each, one mapped task per (agent, task, trial).

    parse the agents (oracle, abstain, LLM agents with their options) → resolve API keys kept in Prefect Secret blocks
      → one global concurrency limit per model endpoint (trials in flight against it)
      → load the build's tasks (a seeded `limit` per suite) → skip the trials this run id already completed
      → per batch: map run-trial over (agent, task, trial) — on local threads, or on a Dask cluster (`dask_address`);
        a trial stopped by a transient endpoint failure is retried, one that still fails is recorded as an error
      → write the batch as one parquet part
      → metric table (ehrbench.evaluation.report) as a Prefect artifact
      → with a run prefix (the nightly deployment's), the comparison with the previous run of that prefix: metric
        changes and tasks that flipped (ehrbench.reports.compare) as a second artifact
      → the run's dashboard (flows/report.py: leaderboards with intervals, breakdowns, trends of the run's series with
        regressions flagged, transcripts) rendered to reports/site/ and linked as an artifact

Results: data/results/run_id=<id>/part-*.parquet (DuckDB, pandas and polars read the folder). Every trial spills its
row the moment it ends; re-running with the same run id resumes: spilled rows become a part, completed trials are
skipped — a killed run loses at most the trials in flight.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from prefect import flow, get_run_logger, task, unmapped
from prefect.blocks.system import Secret
from prefect.cache_policies import NONE
from prefect.client.orchestration import get_client
from prefect.concurrency.sync import concurrency
from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner

from ehrbench.agents.baselines import make_agents
from ehrbench.agents.config import BASELINES, AgentConfig, parse_agents
from ehrbench.agents.sandbox import isolation
from ehrbench.evaluation.judge import AnswerJudge
from ehrbench.evaluation.report import metric_table
from ehrbench.evaluation.results import ResultStore
from ehrbench.evaluation.tasks import load_tasks
from ehrbench.evaluation.trial import TransientTrialError, failed_trial_row, run_trial
from ehrbench.llm.tools import tool_chat_model
from ehrbench.parameter_errors import one_line_errors
from ehrbench.progress import TrialCount, report_trials
from ehrbench.reports.compare import compare_runs, comparison_markdown, previous_run
from ehrbench.settings import DataLayout, EvaluationParameters, default_data_dir
from ehrbench.tasks import SUITES, Agent, EvalTask
from flows.endpoint_slots import RunLeases, held_slots
from flows.prefect_api import (
    announce,
    artifact_url,
    is_transient_api_error,
    markdown_artifact,
    table_artifact,
    with_api_retries,
)
from flows.report import render_report

# Slots are leased and the lease renewed while the holder lives; a killed run's slots come back when its lease runs
# out on a `prefect server` (the shortest lease it accepts), or when the run is resumed (flows/endpoint_slots.py).
SLOT_LEASE_S = 60.0
SLOT_WAIT_S = 900.0  # how long a batch waits for its endpoint's slots before the run stops and says why
DEFAULT_THREADS = 4  # trials in flight without a model endpoint (oracle, abstain: they only read and score)
ANNOUNCE_S = 30.0  # how often the run's logs say how far the trials are


@flow(name="evaluate-agents", log_prints=True)
def evaluate_agents(
    build: str = "latest",
    suites: list[str] = list(SUITES),  # noqa: B006 - Prefect parameters are copied per run
    agents: list[str | dict] = list(BASELINES),  # noqa: B006
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
    dask_address: str | None = None,
    report: bool = True,
    report_dir: str | None = None,
    data_dir: str | None = None,
    unsafe_sandbox: bool = False,
) -> str:
    """Evaluate `agents` on `suites` of `build` with `trials` trials per task; `limit`: tasks per suite (a seeded
    sample). An agent is `oracle`, `abstain`, an LLM spec (`llm:<model>@<base_url>`, `llm:openai:<model>`,
    `llm:gemini:<model>`; `agent_options` apply to these) or a mapping {name, model, options}. Without `run_id` the
    run is named `<run_prefix><UTC time>` and, when an earlier run of that prefix exists (the nightly schedule's),
    compared with it. With `report`, the run's dashboard is rendered into `report_dir` (default reports/site/).
    LLM agents' SQL and Python run under bubblewrap; where it cannot run the flow stops, unless `unsafe_sandbox`
    (then every row records "unsafe: <why>"). Returns the run's results folder."""
    with one_line_errors(EvaluationParameters):  # out of range: one line naming the parameter, before any trial
        EvaluationParameters(suites=suites, agents=agents, trials=trials, limit=limit, seed=seed, run_id=run_id,
                             run_prefix=run_prefix, batch_size=batch_size,
                             concurrency_per_endpoint=concurrency_per_endpoint, transient_retries=transient_retries,
                             retry_delay_s=retry_delay_s)
    logger = get_run_logger()
    configs = parse_agents(agents, agent_options)
    layout = DataLayout(root=Path(data_dir).resolve() if data_dir else default_data_dir())
    build_dir = layout.build_folder(build).resolve()
    build_id = json.loads((build_dir / "manifest.json").read_text())["build_id"]
    tasks = load_tasks(build_dir, tuple(suites), limit, seed)
    store = ResultStore(layout.results, run_id or run_prefix + _scheduled_time().strftime("%Y%m%dT%H%M%SZ"))
    set_aside_before = _files_in(store.quarantine)
    recovered = store.recover()  # rows a killed run of this id spilled
    if recovered:
        logger.info("recovered the trials an interrupted run finished into %s", recovered.name)
    earlier = store.builds() - {build_id}
    if earlier:  # a run mixing builds would compare answers to different gold
        raise ValueError(f"run {store.run_id} was made on build {', '.join(sorted(earlier))}, not {build_id}; "
                         f"resume it with --build {sorted(earlier)[0]} or start a new run id")
    limits = endpoint_limits(configs, concurrency_per_endpoint)
    # before any trial: a run whose agents' code could not be isolated stops here and says what to do
    sandbox = isolation(allow_unsafe=unsafe_sandbox) if any(c.kind == "llm" for c in configs) else None
    if sandbox and sandbox != "bubblewrap":
        logger.warning("agent SQL and Python run WITHOUT the OS sandbox (%s); every result row records it", sandbox)
    agent_objects = make_agents(configs, {task.key: task.gold for task in tasks}, secret_api_keys(configs),
                                sandbox=sandbox)
    completed = store.completed()
    if set_aside := sorted(_files_in(store.quarantine) - set_aside_before):  # in the run's own log, not only Python's
        logger.warning("moved %d unreadable result file(s) to %s; their trials run again: %s", len(set_aside),
                       store.quarantine, ", ".join(set_aside))
    pending = [(agent, task, trial) for agent in agent_objects for task in tasks
               for trial in range(trials) if (agent.name, *task.key, trial) not in completed]
    announce(f"run {store.run_id} on build {build_id}: {_count(len(agent_objects), 'agent')} × "
             f"{_count(len(tasks), 'task')} × {_count(trials, 'trial')}: {len(pending):,} to run "
             f"({len(completed):,} done before)")
    run_one = trial_task.with_options(retries=transient_retries, retry_delay_seconds=retry_delay_s)
    tally = _Tally(len(pending))
    for batch in _batches(pending, batch_size):  # one agent per batch: one endpoint, one limit
        limit_name = limits.get(batch[0][0].name)
        store.write(_run_batch(run_one, batch, build_id, store, judge_model, limit_name,
                               concurrency_per_endpoint, dask_address, tally))
    announce(f"trials done: {tally.done:,} ({tally.failed:,} failed) in {tally.elapsed():.0f} s; results in "
             f"{store.folder}")
    table = metric_table(store.folder)
    table_artifact(key="evaluation-metrics", table=[_rounded(row) for row in table],
                   description=f"Metrics of run {store.run_id} on build {build_id}")
    previous = previous_run(layout.results, store.run_id, run_prefix) if run_prefix else None
    if previous is not None:
        comparison = compare_runs(store.folder, previous)
        announce(f"compared with {comparison.previous_run}: {len(comparison.metric_changes)} metrics changed, "
                 f"{len(comparison.flipped_tasks)} tasks flipped")
        markdown_artifact(key="evaluation-comparison", markdown=comparison_markdown(comparison, store.run_id),
                          description="Metric changes and flipped tasks since the previous run")
    dashboard = _render_dashboard(store, run_prefix, report_dir, layout.root) if report else None
    if dashboard:  # the subflow announced it; the run's own logs (`ehrbench follow`, --watch) say it too
        logger.info("dashboard: %s", dashboard)
    markdown_artifact(key="evaluation-summary", description=f"Run {store.run_id}: what ran and where to look",
                      markdown=_summary_markdown(store, build_id, agent_objects, tasks, trials, tally, dashboard,
                                                 compared=previous is not None))
    announce(f"next: uv run ehrbench metrics --run-id {store.run_id}"
             + ("" if report else f"; make report RUN_ID={store.run_id}  # the dashboard"))
    return str(store.folder)


def _summary_markdown(store: ResultStore, build_id: str, agents: list[Agent], tasks: list[EvalTask], trials: int,
                      tally: _Tally, dashboard: str | None, compared: bool) -> str:
    """The parent run's artifact: what ran, on what, and links to the stage artifacts and the dashboard."""
    keys = ["evaluation-metrics", *(["evaluation-comparison"] if compared else []),
            *(["evaluation-report-summary"] if dashboard else [])]
    by_suite = ", ".join(f"{n} {suite}" for suite, n in sorted(Counter(t.view.suite for t in tasks).items()))
    return "\n".join([
        f"# Evaluation run {store.run_id}", "",
        f"- build: `{build_id}`",
        f"- agents: {', '.join(f'`{agent.name}`' for agent in agents)}",
        f"- tasks: {len(tasks)} ({by_suite}), {trials} trial(s) each",
        f"- trials run now: {tally.done:,} ({tally.failed:,} failed) in {tally.elapsed():.0f} s",
        f"- results: `{store.folder}`",
        f"- dashboard: [{dashboard}]({dashboard})" if dashboard else
        f"- dashboard: not rendered; `make report RUN_ID={store.run_id}`",
        "", "## Artifacts", *[f"- [{key}]({artifact_url(key)})" for key in keys],
        "", "## Next", f"- `uv run ehrbench metrics --run-id {store.run_id}`", ""])


def _files_in(folder: Path) -> set[str]:
    return {path.name for path in folder.iterdir()} if folder.is_dir() else set()


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _scheduled_time() -> datetime:
    """When this flow run was due: the default run id's time. A retry of the flow run keeps it, so the retry
    resumes the same run (completed trials skipped) instead of starting over."""
    expected = flow_run.scheduled_start_time
    return expected.astimezone(UTC) if expected else datetime.now(UTC)


def _render_dashboard(store: ResultStore, run_prefix: str, report_dir: str | None, data_dir: Path) -> str:
    """The last stage. Its inputs are the run's parquet parts, complete by now, so when the Prefect API keeps
    failing the run's results stand and only the dashboard is missing; the flow fails and says how to finish it."""
    try:
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


class DashboardNotRendered(RuntimeError):
    """The evaluation finished; only its dashboard stage failed."""


def _retry_transient(task, task_run, state) -> bool:
    """Retry a trial only when an endpoint failure may pass (rate limit, 5xx, timeout)."""
    return isinstance(state.result(raise_on_failure=False), TransientTrialError)


@task(name="run-trial", cache_policy=NONE, retry_condition_fn=_retry_transient,
      task_run_name="{agent.name}/{task.view.suite}/{task.view.task_id}/{trial}")
def trial_task(agent: Agent, task: EvalTask, trial: int, build_id: str, store: ResultStore, judge_model: str | None,
               limit_name: str | None) -> dict:
    judge = _answer_judge(judge_model)
    with ExitStack() as held:
        if limit_name is not None:  # strict: a missing limit must not silently unthrottle
            held.enter_context(concurrency(limit_name, occupy=1, strict=True, lease_duration=SLOT_LEASE_S))
        row = run_trial(agent, task, trial, build_id, store.artifacts, judge=judge, raise_transient=True)
    store.spill(row)  # kept even if the run is killed before the batch is written
    return row


def _batches(pending: list[tuple[Agent, EvalTask, int]], size: int):
    """Consecutive trials of one agent, at most `size` of them (`pending` is ordered by agent)."""
    start = 0
    while start < len(pending):
        agent = pending[start][0]
        end = start
        while end < len(pending) and end - start < size and pending[end][0] is agent:
            end += 1
        yield pending[start:end]
        start = end


def _run_batch(run_one, batch: list[tuple[Agent, EvalTask, int]], build_id: str, store: ResultStore,
               judge_model: str | None, limit_name: str | None, slots: int, dask_address: str | None,
               tally: _Tally) -> list[dict]:
    """The rows of one batch of one agent; a trial whose retries ran out becomes an error row (re-run on resume).

    How the endpoint's global concurrency limit is held: on local threads the batch takes `slots` slots at once and
    runs on that many threads — one acquisition per batch, because each acquisition costs seconds on a SQLite-backed
    Prefect server (its writes collide with the run's own: "database is locked", retried by the client); on Dask,
    where the workers decide what runs when, every trial takes its own slot."""
    per_trial = limit_name if dask_address else None
    parameters = {"agent": [a for a, _, _ in batch], "task": [t for _, t, _ in batch],
                  "trial": [k for _, _, k in batch], "build_id": unmapped(build_id), "store": unmapped(store),
                  "judge_model": unmapped(judge_model), "limit_name": unmapped(per_trial)}
    if dask_address:
        from prefect_dask import DaskTaskRunner

        with DaskTaskRunner(address=dask_address) as runner:  # the cluster outlives the run; only the client closes
            return _collect(runner.map(run_one, parameters), batch, build_id, tally)
    with ExitStack() as held:
        if limit_name:
            slots = min(slots, _limit_of(limit_name))  # another run may have lowered the limit since
            held.enter_context(_endpoint_slots(limit_name, slots, RunLeases(store.folder)))
        with ThreadPoolTaskRunner(max_workers=slots if limit_name else DEFAULT_THREADS) as runner:
            return _collect(runner.map(run_one, parameters), batch, build_id, tally)


def _collect(futures, batch: list[tuple[Agent, EvalTask, int]], build_id: str, tally: _Tally) -> list[dict]:
    rows = []
    for future, (agent, eval_task, trial) in zip(futures, batch, strict=True):
        future.wait()
        result = future.result(raise_on_failure=False)
        failed = isinstance(result, BaseException)
        rows.append(failed_trial_row(agent.name, eval_task, trial, build_id, result) if failed else result)
        tally.add(rows[-1])
    return rows


class _Tally:
    """Trials done and failed: a terminal's bar follows every one, the run's logs get a line every ANNOUNCE_S."""

    def __init__(self, total: int):
        self.total, self.done, self.failed = total, 0, 0
        self._started = self._announced = time.monotonic()

    def add(self, row: dict) -> None:
        self.done += 1
        self.failed += row.get("status") == "error"
        count = TrialCount(self.done, self.total, self.failed)
        report_trials(count)
        if time.monotonic() - self._announced >= ANNOUNCE_S and self.done < self.total:
            self._announced = time.monotonic()
            get_run_logger().info(count.describe())

    def elapsed(self) -> float:
        return time.monotonic() - self._started



def endpoint_limits(configs: list[AgentConfig], per_endpoint: int) -> dict[str, str]:
    """Agent name → the global concurrency limit of its model endpoint, created or updated to `per_endpoint`."""
    limits = {config.name: f"llm-endpoint:{config.endpoint}" for config in configs if config.endpoint}
    if limits:
        with get_client(sync_client=True) as client:
            for name in sorted(set(limits.values())):
                client.upsert_global_concurrency_limit_by_name(name, per_endpoint)
    return limits


@contextmanager
def _endpoint_slots(name: str, slots: int, leases: RunLeases):
    """Hold `slots` of an endpoint's limit, first giving back those an interrupted run of this run id still held;
    give up after SLOT_WAIT_S with what to do about it."""
    for released in leases.release_abandoned():
        announce(f"released {released}, held by an earlier run of this run id that did not finish")
    try:
        with held_slots(name, slots, leases, lease_duration=SLOT_LEASE_S, timeout_seconds=SLOT_WAIT_S):
            yield
    except TimeoutError:
        raise RuntimeError(
            f"no free slots on the concurrency limit {name!r} after {SLOT_WAIT_S:.0f} s: another run is using the "
            f"endpoint, or a killed run of another run id still holds them (resuming that run id gives them back; a "
            f"`prefect server` also reclaims them {SLOT_LEASE_S:.0f} s after the kill). As a last resort free them "
            f"with `prefect gcl update {name} --active-slots 0` and re-run with the same run id.") from None


def _limit_of(name: str) -> int:
    with get_client(sync_client=True) as client:
        return client.read_global_concurrency_limit_by_name(name).limit


def secret_api_keys(configs: list[AgentConfig]) -> dict[str, str]:
    """Agent name → API key, for the agents whose key is kept in a Prefect Secret block."""
    keys = {}
    for config in configs:
        name = config.options.api_key_secret if config.kind == "llm" else None
        if name:
            try:
                keys[config.name] = Secret.load(name).get()
            except ValueError as exc:  # Prefect raises a plain ValueError for a missing block
                raise ValueError(f"agent {config.name!r}: api_key_secret {name!r}: {exc}") from None
    return keys


@cache
def _answer_judge(judge_model: str | None) -> AnswerJudge:
    return AnswerJudge(tool_chat_model(judge_model) if judge_model else None)


def _rounded(row: dict) -> dict:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}
