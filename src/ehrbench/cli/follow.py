"""`ehrbench follow`: a deployment's run as a person follows it — its own log lines (a line per stage, a trials line
every 30 s, the summary and next steps) until it ends. `prefect deployment run … --watch` also lists every task
run's state changes: thousands for a nightly evaluation."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from uuid import UUID

from ehrbench.errors import EhrbenchError

POLL_S = 2.0
PAGE = 200  # log lines per request (the API's default limit)
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def follow_run(run: str | None, deployment: str | None, print_line, *, poll_s: float = POLL_S) -> str:
    """Print the run's own log lines as they arrive (not its tasks' or subflows'); returns its final state type.
    `run`: a flow run id or name; else the newest run of `deployment` (`<flow name>/<deployment name>`) that is
    due by now."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterExpectedStartTime,
        FlowRunFilterName,
        LogFilter,
        LogFilterFlowRunId,
    )
    from prefect.client.schemas.sorting import FlowRunSort, LogSort

    with get_client(sync_client=True) as client:
        if run is not None:
            flow_run = _by_id_or_name(client, run, FlowRunFilter, FlowRunFilterName)
        else:
            try:
                found = client.read_deployment_by_name(deployment)
            except Exception as exc:  # Prefect raises ObjectNotFound
                raise EhrbenchError(f"--deployment: no deployment {deployment!r} on this Prefect server "
                                    "(register them with 'make deploy')") from exc
            due = FlowRunFilter(expected_start_time=FlowRunFilterExpectedStartTime(
                before_=datetime.now(UTC) + timedelta(seconds=5)))  # not the schedule's future runs
            runs = client.read_flow_runs(flow_run_filter=due, sort=FlowRunSort.EXPECTED_START_TIME_DESC, limit=1,
                                         deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[found.id])))
            if not runs:
                raise EhrbenchError(f"deployment {deployment} has no runs yet; start one with "
                                    f"'uv run prefect deployment run {deployment}'")
            flow_run = runs[0]
        print_line(f"following flow run {flow_run.name} ({flow_run.id}), {flow_run.state_type.value.lower()}")
        shown = 0
        of_the_run = LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run.id]))
        while True:
            state = client.read_flow_run(flow_run.id).state
            logs = client.read_logs(log_filter=of_the_run, sort=LogSort.TIMESTAMP_ASC, offset=shown, limit=PAGE)
            for log in logs:
                if log.task_run_id is not None:  # a task's line (each trial's "Finished in state …")
                    continue
                prefix = "" if log.level < 30 else ("warning: " if log.level < 40 else "error: ")
                print_line(prefix + log.message)
            shown += len(logs)
            if state.type.value in FINAL and len(logs) < PAGE:
                print_line(f"flow run {flow_run.name}: {state.name}" + (f" — {state.message}" if state.message
                                                                         and state.type.value != "COMPLETED" else ""))
                return state.type.value
            if len(logs) < PAGE:
                time.sleep(poll_s)


def _by_id_or_name(client, run: str, FlowRunFilter, FlowRunFilterName):  # noqa: N803 - Prefect's filter classes
    try:
        return client.read_flow_run(UUID(run))
    except ValueError:
        pass
    except Exception as exc:
        raise EhrbenchError(f"no flow run with id {run} on this Prefect server") from exc
    runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[run])), limit=2)
    if len(runs) != 1:
        raise EhrbenchError(f"{'no' if not runs else 'more than one'} flow run named {run!r}; give its id")
    return runs[0]
