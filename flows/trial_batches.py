"""run-trial, the task of evaluate-agents (flows/evaluate.py), and a batch of one agent's trials mapped over it: on
local threads, or on a Dask cluster. A trial whose retries ran out becomes an error row (re-run on resume).

How the endpoint's global concurrency limit is held: on local threads an agent's consecutive batches take `slots`
slots at once and run on that many threads — one acquisition per agent, not per trial or per batch, because an
acquisition costs seconds on a SQLite-backed Prefect server (its writes collide with the run's own: "database is
locked", retried by the client with backoff), and taking back slots just released cost 2-7 s per batch boundary,
a quarter of a 1,000-trial run (bench/evaluate.py); on Dask, where the workers decide what runs when, every trial
takes its own slot."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import cache

from prefect import task, unmapped
from prefect.cache_policies import NONE
from prefect.concurrency.sync import concurrency
from prefect.task_runners import ThreadPoolTaskRunner

from ehrbench.evaluation.judge import AnswerJudge
from ehrbench.evaluation.plan import Batch, Trial
from ehrbench.evaluation.results import ResultStore
from ehrbench.evaluation.tally import TrialTally
from ehrbench.evaluation.trial import TransientTrialError, failed_trial_row, run_trial
from ehrbench.llm.tools import tool_chat_model
from ehrbench.tasks import Agent, EvalTask
from flows.endpoint_slots import SLOT_LEASE_S, RunLeases, endpoint_slots, limit_of

DEFAULT_THREADS = 4  # trials in flight without a model endpoint (oracle, abstain: they only read and score)


def _retry_transient(task, task_run, state) -> bool:
    """Retry a trial only when an endpoint failure may pass (rate limit, 5xx, timeout)."""
    return isinstance(state.result(raise_on_failure=False), TransientTrialError)


@task(name="run-trial", cache_policy=NONE, retry_condition_fn=_retry_transient,
      task_run_name="{agent.name}/{task.view.suite}/{task.view.task_id}/{trial}")
def trial_task(agent: Agent, task: EvalTask, trial: int, build_id: str, store: ResultStore,
               judge: tuple[str | None, int], limit_name: str | None) -> dict:
    """`judge`: the judge model's spec (None: no model) and the votes the noteqa judge takes."""
    judge = _answer_judge(*judge)
    with ExitStack() as held:
        if limit_name is not None:  # strict: a missing limit must not silently unthrottle
            held.enter_context(concurrency(limit_name, occupy=1, strict=True, lease_duration=SLOT_LEASE_S))
        row = run_trial(agent, task, trial, build_id, store.artifacts, judge=judge, raise_transient=True)
    store.spill(row)  # kept even if the run is killed before the batch is written
    return row


@contextmanager
def held_for_batches(limit_name: str | None, slots: int, store: ResultStore,
                     dask_address: str | None) -> Iterator[int]:
    """Hold up to `slots` of an endpoint's limit (on local threads) while the batches of one agent run; yields the
    threads to run them on. Without a limit (oracle, abstain) or on Dask nothing is held here."""
    if limit_name is None or dask_address:
        yield slots if limit_name else DEFAULT_THREADS
        return
    slots = min(slots, limit_of(limit_name))  # another run may have lowered the limit since
    with endpoint_slots(limit_name, slots, RunLeases(store.folder)):
        yield slots


def run_batch(run_one, batch: Batch, build_id: str, store: ResultStore, judge: tuple[str | None, int], threads: int,
              dask_address: str | None, tally: TrialTally) -> list[dict]:
    """The rows of `batch`, its trials mapped over `run_one` (trial_task with the run's retries): on `threads` local
    threads, within the slots `held_for_batches` holds; on Dask each trial holding its own slot."""
    trials, limit_name = batch.trials, batch.limit
    parameters = {"agent": [a for a, _, _ in trials], "task": [t for _, t, _ in trials],
                  "trial": [k for _, _, k in trials], "build_id": unmapped(build_id), "store": unmapped(store),
                  "judge": unmapped(judge), "limit_name": unmapped(limit_name if dask_address else None)}
    if dask_address:
        from prefect_dask import DaskTaskRunner

        with DaskTaskRunner(address=dask_address) as runner:  # the cluster outlives the run; only the client closes
            return _collect(runner.map(run_one, parameters), trials, build_id, tally)
    with ThreadPoolTaskRunner(max_workers=threads) as runner:
        return _collect(runner.map(run_one, parameters), trials, build_id, tally)


def _collect(futures, trials: list[Trial], build_id: str, tally: TrialTally) -> list[dict]:
    rows = []
    for future, (agent, eval_task, trial) in zip(futures, trials, strict=True):
        future.wait()
        result = future.result(raise_on_failure=False)
        failed = isinstance(result, BaseException)
        rows.append(failed_trial_row(agent.name, eval_task, trial, build_id, result) if failed else result)
        tally.add(rows[-1])
    return rows


@cache
def _answer_judge(judge_model: str | None, votes: int = 1) -> AnswerJudge:
    return AnswerJudge(tool_chat_model(judge_model) if judge_model else None, votes)
