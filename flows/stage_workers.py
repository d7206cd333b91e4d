"""The stages from the databases stage on, side by side in worker processes: dq, noteqa, meds (started during the
databases stage, on their copy of what they read), fhir (once dbt has built the FHIR models) and questions (once the
databases are exported). The workers start with the build, and import what their stages will need while the first
stages leave a core idle (flows/warm_up.py).

They only read (the warehouse, or the side stages' copy) and write into separate folders of the build, and their work
is mostly Python, which threads would run on one core. So they run as Prefect tasks in worker processes (one per core,
each a ProcessPoolTaskRunner of one process, at a lower priority than the flow's process, whose dbt run they must not
slow): each task runs its stage's subflow in a worker, timed there. A stage that would otherwise run on what earlier
stages left in a worker (meds, fhir) asks for a fresh one, which replaces the used one. In the Prefect UI a stage is a
`stage/<name>` task run of build-benchmark with the stage's subflow under it.

What the workers log reaches the Prefect API as any run log does (Prefect forwards it); it also reaches the build's
handlers here — build.log and, from the CLI, the terminal's warnings — as if the stage had run in this process.
"""

from __future__ import annotations

import contextvars
import importlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from prefect import Flow, task
from prefect.cache_policies import NONE
from prefect.client.orchestration import get_client
from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

from ehrbench.freed_memory import release_freed_memory
from ehrbench.manifest import StageTiming
from ehrbench.stage_clock import StageClock
from flows.worker_process import WorkerProcess


@dataclass(frozen=True)
class StageOutcome:
    """What a worker sends back: the stage flow's return value and when it ran."""

    result: Any
    timing: StageTiming


def _run_stage(name: str, stage_flow: str, parameters: dict[str, Any]) -> StageOutcome:
    """`stage_flow`: "<module>:<name>" of the flow, imported in the worker (a pickled flow would carry copies of its
    module's names, not the module). What the stage freed goes back to the system before the worker's next stage."""
    module, _, attribute = stage_flow.partition(":")
    flow = getattr(importlib.import_module(module), attribute)
    clock = StageClock()
    try:
        return StageOutcome(flow(**parameters), clock.timing())
    finally:
        release_freed_memory()


# The task wraps a function of another name so that cloudpickle sends the worker a reference to this module, not a
# copy of the function.
run_stage = task(name="stage", task_run_name="stage/{name}", cache_policy=NONE)(_run_stage)


# called as each stage ends: its name, outcome (or error) and seconds since a worker got it
StageEnded = Callable[[str, StageOutcome | BaseException, float], None]


class StageNotRun(Exception):
    """A stage that did not run because a stage it comes after failed."""


@dataclass(frozen=True)
class _Stage:
    flow_reference: str  # "<module>:<name>"
    parameters: dict[str, Any]
    after: tuple[str, ...]
    priority: int
    fresh_worker: bool


class Worker(Protocol):
    """One worker process, as StageWorkers uses it (WorkerProcess; a test's fake)."""

    def submit(self, task: Any, parameters: dict[str, Any]) -> Any: ...  # a PrefectConcurrentFuture

    def let_exit(self) -> None: ...  # no stage comes: exit once idle, without waiting for it

    def close(self) -> None: ...  # exit, and wait for it


# opens a worker that imports these modules as it starts
OpenWorker = Callable[[tuple[str, ...]], Worker]


@dataclass
class _Slot:
    worker: Worker
    ran_a_stage: bool = False


class StageWorkers:
    """`add` the stages, optionally `start()`, then `run()`: each stage's result, its end reported through `on_done`
    (in the order the stages ended, from `run()` on).

    From `start()` (or `run()`) on, a thread of this process hands a stage to a worker as one is free and the stages
    it comes after have succeeded, while this process goes on with other work; it is woken by a stage's end or a new
    stage, never polls. Of the stages that wait for a worker, the one of highest `priority` goes first, then the first
    added.

    `workers` workers are opened at once (each importing `warm_up`). A stage added with `fresh_worker` runs in a
    worker that ran no stage before: if every free worker has run one, a new worker that imports only the stage's
    module takes the place of one of them, which exits in the background. What a stage leaves in its worker's heap
    and the libraries it loaded for itself cannot all be given back to the system (ehrbench.freed_memory): in a demo
    build the worker that had run noteqa and meds held ~640 MiB when fhir came and ~0.85 GiB in it; a fresh one peaks
    at ~0.38 GiB."""

    def __init__(self, open_worker: OpenWorker, workers: int, on_done: StageEnded, warm_up: Sequence[str] = ()):
        self._open_worker, self.workers, self._on_done = open_worker, workers, on_done
        self._idle: list[_Slot] = []
        try:
            for _ in range(workers):
                self._idle.append(_Slot(open_worker(tuple(warm_up))))
        except BaseException:
            for slot in self._idle:
                slot.worker.close()
            raise
        self._retiring: list[threading.Thread] = []  # replaced workers exiting
        self._stages: dict[str, _Stage] = {}
        self._waiting: list[str] = []
        self._running: dict[str, tuple[float, Any, _Slot]] = {}  # name -> (when handed over, its future, its worker)
        self._outcomes: dict[str, Any] = {}
        self._ended: list[tuple[str, Any, float]] = []  # (name, outcome, seconds) not yet reported to on_done
        self._changed = threading.Condition()  # guards all of the above; notified on a stage's end or a new stage
        self._all_added = False  # run() was called: once nothing waits or runs, the dispatcher ends
        self._dispatched_all = False
        self._dispatcher: threading.Thread | None = None
        self._error: BaseException | None = None  # what broke the dispatcher itself

    def add(self, name: str, stage_flow: Flow, after: tuple[str, ...] = (), priority: int = 0,
            fresh_worker: bool = False, **parameters: Any) -> None:
        """Stage `name`: `stage_flow` (a module-level flow) called with `parameters`, once the stages `after` have
        succeeded; ahead of the waiting stages of a lower `priority`; in a worker that ran no stage before if
        `fresh_worker`."""
        with self._changed:
            unknown = [before for before in after if before not in self._stages]
            if unknown:
                raise ValueError(f"stage {name} comes after {unknown}: add those first")
            if self._all_added:
                raise RuntimeError(f"stage {name} added after run()")
            self._stages[name] = _Stage(_reference(stage_flow), parameters, after, priority, fresh_worker)
            self._waiting.append(name)
            self._changed.notify_all()

    def run_now(self, name: str, stage_flow: Flow, **parameters: Any) -> Any:
        """Run stage `name` in a worker and wait for it, before `start()`: a stage of the flow's own sequence whose
        libraries the workers hold and this process would otherwise load for the rest of the build (validate: Great
        Expectations, ~130 MiB). Its end is reported through `on_done`; returns its result, or raises its error."""
        if self._dispatcher is not None:
            raise RuntimeError(f"stage {name}: run_now() after start() would wait for a free worker")
        handed_over, slot = time.perf_counter(), self._idle[0]
        slot.ran_a_stage = True
        try:
            outcome = slot.worker.submit(
                run_stage, {"name": name, "stage_flow": _reference(stage_flow), "parameters": parameters}).result()
        except BaseException as exc:
            self._on_done(name, exc, time.perf_counter() - handed_over)
            raise
        self._on_done(name, outcome, time.perf_counter() - handed_over)
        return outcome.result

    def start(self) -> None:
        """Hand stages to workers from now on, while this process goes on (idempotent)."""
        if self._dispatcher is None:
            # the thread runs in this thread's context (Prefect's flow run context: its task runs belong to the flow)
            self._dispatcher = threading.Thread(target=contextvars.copy_context().run, args=(self._dispatch,),
                                                name="stage-dispatcher", daemon=True)
            self._dispatcher.start()

    def run(self) -> dict[str, Any]:
        """Every stage's result by name once all have ended. Else the first failed stage's error (in the order they
        were added), raised once every stage has ended, so that no worker still writes into a build being
        discarded."""
        with self._changed:
            self._all_added = True
            self._changed.notify_all()
        self.start()
        while True:
            with self._changed:
                while not self._ended and not self._dispatched_all:
                    self._changed.wait()
                ended, self._ended, finished = self._ended, [], self._dispatched_all
            for name, outcome, seconds in ended:
                self._on_done(name, outcome, seconds)
            if finished:
                break
        self._dispatcher.join()
        if self._error is not None:
            raise self._error
        for slot in self._idle:  # every stage has ended: the workers exit while this process writes the manifest
            slot.worker.let_exit()
        outcomes = self._outcomes
        for outcome in (outcomes[name] for name in self._stages):
            if isinstance(outcome, BaseException) and not isinstance(outcome, StageNotRun):
                raise outcome
        return {name: outcomes[name].result for name in self._stages}

    def close(self) -> None:
        """No stage is handed over from now on (the flow failed before `run()`); the running ones go on."""
        with self._changed:
            self._waiting.clear()
            self._all_added = True
            self._changed.notify_all()

    def close_workers(self) -> None:
        """Close every worker, waiting for the running stages, and for the replaced workers to exit."""
        with self._changed:
            slots = [*self._idle, *(slot for _, _, slot in self._running.values())]
        for slot in slots:
            slot.worker.close()
        for retiring in self._retiring:
            retiring.join()

    def _dispatch(self) -> None:
        try:
            self._dispatch_until_all_ended()
        except BaseException as exc:  # noqa: BLE001 — raised by run(), not lost in this thread
            self._error = exc
        finally:
            with self._changed:
                self._dispatched_all = True
                self._changed.notify_all()

    def _dispatch_until_all_ended(self) -> None:
        with self._changed:
            while self._waiting or self._running or not self._all_added:
                self._collect_ended()
                self._hand_over()
                if self._waiting or self._running or not self._all_added:
                    self._changed.wait(timeout=5)  # woken by a stage's end or a new stage; the timeout: a safety net

    def _collect_ended(self) -> None:
        for name in [n for n, (_, future, _) in self._running.items() if future.wrapped_future.done()]:
            started, future, slot = self._running.pop(name)
            self._idle.append(slot)
            try:
                self._outcomes[name] = future.result()
            except BaseException as exc:  # noqa: BLE001 — reported, then raised by run()
                self._outcomes[name] = exc
            self._ended.append((name, self._outcomes[name], time.perf_counter() - started))

    def _hand_over(self) -> None:
        """Report the stages after a failed one as not run (and those after them), then submit the ready stages
        that free workers can take; again while a stage fails to start (its followers do not run, and its worker is
        still free for another)."""
        while True:
            self._report_not_run()
            if not self._submit_ready():
                break
        self._changed.notify_all()  # run() reports what ended

    def _report_not_run(self) -> None:
        outcomes, marked = self._outcomes, True
        while marked:
            marked = False
            for name in [n for n in self._waiting if all(before in outcomes for before in self._stages[n].after)]:
                failed_before = [b for b in self._stages[name].after if isinstance(outcomes[b], BaseException)]
                if failed_before:
                    self._waiting.remove(name)
                    outcomes[name] = StageNotRun(f"{', '.join(failed_before)} failed")
                    self._ended.append((name, outcomes[name], 0.0))
                    marked = True

    def _submit_ready(self) -> bool:
        """Submit the ready stages, the highest priority first, up to the free workers; whether one failed to start."""
        ready = [n for n in self._waiting if all(before in self._outcomes for before in self._stages[n].after)]
        ready.sort(key=lambda n: -self._stages[n].priority)  # stable: the first added first among equals
        started = [self._submit(name) for name in ready[:len(self._idle)]]
        return not all(started)

    def _submit(self, name: str) -> bool:
        """Whether the stage started; one whose submission raised (or whose fresh worker failed to open) is recorded
        as failed with that error, its worker free for another."""
        self._waiting.remove(name)
        stage = self._stages[name]
        slot = None
        try:
            slot = self._take_worker(stage)
            future = slot.worker.submit(
                run_stage, {"name": name, "stage_flow": stage.flow_reference, "parameters": stage.parameters})
        except BaseException as exc:  # noqa: BLE001 — the stage failed to start: reported as its error
            if slot is not None:
                self._idle.append(slot)
            self._outcomes[name] = exc
            self._ended.append((name, exc, 0.0))
            return False
        slot.ran_a_stage = True
        self._running[name] = (time.perf_counter(), future, slot)
        future.wrapped_future.add_done_callback(lambda _: self._notify())
        return True

    def _take_worker(self, stage: _Stage) -> _Slot:
        """A free worker for `stage`: for a fresh_worker stage one that ran no stage, else a new one in place of a
        free one, which exits in the background (opened first: if it fails to open, the free one stays); for another
        stage preferably one that ran a stage (an unused one may spare a later fresh_worker stage a new worker)."""
        used, unused = ([slot for slot in self._idle if slot.ran_a_stage is ran] for ran in (True, False))
        if not stage.fresh_worker or unused:
            slot = unused[0] if stage.fresh_worker else (used or unused)[0]
            self._idle.remove(slot)
            return slot
        fresh = _Slot(self._open_worker((stage.flow_reference.partition(":")[0],)))
        replaced = self._idle.pop(0)
        retiring = threading.Thread(target=replaced.worker.close, name="stage-worker-exit", daemon=True)
        retiring.start()
        self._retiring.append(retiring)
        return fresh

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()


def _reference(stage_flow: Flow) -> str:
    return f"{stage_flow.fn.__module__}:{stage_flow.fn.__name__}"


@contextmanager
def stage_workers(on_done: StageEnded, max_workers: int | None = None,
                  warm_up: Sequence[str] = ()) -> Iterator[StageWorkers]:
    """`max_workers` worker processes for the stages of a build flow's run; default: Prefect's setting
    PREFECT_TASKS_RUNNER_PROCESS_POOL_MAX_WORKERS (1 runs the stages one at a time: the least memory), else the
    cores. (One more, so that fhir never waits for a side stage to end, measured no faster on 2 cores: the stages
    are bound by the CPU they share.) With `warm_up` (modules: flows/warm_up.py), the workers start at once and
    import those, so that they can be opened stages before their first stage is added.

    Without a configured API the flow runs on Prefect's temporary server; the workers are pointed at it (else each
    would start its own)."""
    with get_client(sync_client=True) as client:
        api_url = str(client.api_url)
    workers = (max_workers or get_current_settings().tasks.runner.process_pool_max_workers or os.cpu_count()
               or 1)
    with temporary_settings({PREFECT_API_URL: api_url}):
        stages = StageWorkers(WorkerProcess, workers, on_done, warm_up)
        try:
            yield stages
        finally:
            stages.close()  # a flow that failed before run(): the stages still waiting never start
            stages.close_workers()
