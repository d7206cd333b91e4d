"""evaluate-agents: agents on the suites of a build, k trials each, one mapped task per (agent, task, trial).

    load the build's tasks (a seeded `limit` per suite) → skip the trials this run id already completed
      → per batch: map run-trial over (agent, task, trial) → write the batch as one parquet part
      → metric table (ehrbench.evaluation.report) as a Prefect artifact
      → with a run prefix (the nightly deployment's), the comparison with the previous run of that prefix: metric
        changes and tasks that flipped (ehrbench.evaluation.compare) as a second artifact

Results: data/results/run_id=<id>/part-*.parquet (DuckDB, pandas and polars read the folder). Re-running with the
same run id resumes: completed trials are skipped, a killed run loses at most its batch in flight.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger, task, unmapped
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE

from ehrbench.agents.base import Agent
from ehrbench.agents.baselines import BASELINES, AbstainAgent, OracleAgent
from ehrbench.evaluation.compare import compare_runs, comparison_markdown, previous_run
from ehrbench.evaluation.report import metric_table
from ehrbench.evaluation.results import ResultStore
from ehrbench.evaluation.tasks import SUITES, EvalTask, load_tasks
from ehrbench.evaluation.trial import run_trial
from ehrbench.settings import DataLayout, default_data_dir


@flow(name="evaluate-agents", log_prints=True)
def evaluate_agents(
    build: str = "latest",
    suites: list[str] = list(SUITES),  # noqa: B006 - Prefect parameters are copied per run
    agents: list[str] = list(BASELINES),  # noqa: B006
    trials: int = 1,
    limit: int | None = None,
    run_id: str | None = None,
    run_prefix: str = "",
    seed: int = 0,
    batch_size: int = 200,
    data_dir: str | None = None,
) -> str:
    """Evaluate `agents` (oracle, abstain) on `suites` of `build` with `trials` trials per task; `limit`: tasks per
    suite (a seeded sample). Without `run_id` the run is named `<run_prefix><UTC time>` and, when an earlier run of
    that prefix exists (the nightly schedule's), compared with it. Returns the run's results folder."""
    logger = get_run_logger()
    layout = DataLayout(root=Path(data_dir).resolve() if data_dir else default_data_dir())
    build_dir = layout.build_folder(build).resolve()
    build_id = json.loads((build_dir / "manifest.json").read_text())["build_id"]
    tasks = load_tasks(build_dir, tuple(suites), limit, seed)
    store = ResultStore(layout.results, run_id or run_prefix + datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ"))
    earlier = store.builds() - {build_id}
    if earlier:  # a run mixing builds would compare answers to different gold
        raise ValueError(f"run {store.run_id} was made on build {', '.join(sorted(earlier))}, not {build_id}; "
                         f"resume it with --build {sorted(earlier)[0]} or start a new run id")
    completed = store.completed()
    pending = [(agent, task, trial) for agent in make_agents(agents, tasks) for task in tasks
               for trial in range(trials) if (agent.name, *task.key, trial) not in completed]
    logger.info("run %s on build %s: %d tasks, %d trials to run (%d done before)", store.run_id, build_id,
                len(tasks), len(pending), len(completed))
    for start in range(0, len(pending), batch_size):
        batch = pending[start:start + batch_size]
        futures = trial_task.map([a for a, _, _ in batch], [t for _, t, _ in batch], [k for _, _, k in batch],
                                 unmapped(build_id), unmapped(store.artifacts))
        store.write([future.result() for future in futures])
    table = metric_table(store.folder)
    create_table_artifact(key="evaluation-metrics", table=[_rounded(row) for row in table],
                          description=f"Metrics of run {store.run_id} on build {build_id}")
    previous = previous_run(layout.results, store.run_id, run_prefix) if run_prefix else None
    if previous is not None:
        comparison = compare_runs(store.folder, previous)
        logger.info("compared with %s: %d tasks flipped", comparison.previous_run, len(comparison.flipped_tasks))
        create_markdown_artifact(key="evaluation-comparison", markdown=comparison_markdown(comparison, store.run_id),
                                 description="Metric changes and flipped tasks since the previous run")
    return str(store.folder)


@task(name="run-trial", cache_policy=NONE, task_run_name="{agent.name}/{task.view.suite}/{task.view.task_id}/{trial}")
def trial_task(agent: Agent, task: EvalTask, trial: int, build_id: str, artifacts: Path) -> dict:
    return run_trial(agent, task, trial, build_id, artifacts)


def make_agents(specs: list[str], tasks: list[EvalTask]) -> list[Agent]:
    agents: list[Agent] = []
    for spec in specs:
        if spec == "oracle":
            agents.append(OracleAgent({task.key: task.gold for task in tasks}))
        elif spec == "abstain":
            agents.append(AbstainAgent())
        else:
            raise ValueError(f"unknown agent {spec!r}; available: {', '.join(BASELINES)}")
    return agents


def _rounded(row: dict) -> dict:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}
