"""How StageWorkers (flows/stage_workers.py) hands stages to workers, with a runner whose futures the test ends by
hand: as soon as a running stage ends, not on a poll (the next stage is submitted within a small fraction of a second;
a poll each second would miss that most of the time); from start() on, while the caller goes on; the waiting stage of
the highest priority first; never a stage after one that failed, however far down, nor after one that failed to
start; none once closed."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from datetime import UTC, datetime

from ehrbench.manifest import StageTiming
from flows.stage_workers import StageOutcome, StageWorkers

HANDOVER_S = 0.5  # generous for a busy machine; the callback wakes the loop in well under a millisecond


class _Submitted:
    """A PrefectConcurrentFuture's surface that StageWorkers uses."""

    def __init__(self):
        self.wrapped_future: Future = Future()

    def result(self):
        return self.wrapped_future.result()


class _HandRunner:
    """Every worker of the test: what was submitted to any of them, by stage name."""

    def __init__(self):
        self.submitted: dict[str, tuple[float, _Submitted]] = {}

    def submit(self, task, parameters):
        future = _Submitted()
        self.submitted[parameters["name"]] = (time.monotonic(), future)
        return future

    def let_exit(self):
        pass

    def close(self):
        pass


def _outcome(name: str) -> StageOutcome:
    return StageOutcome({"stage": name}, StageTiming(started_at=datetime.now(UTC), seconds=0.0))


def _workers(runner: _HandRunner, count: int = 1) -> tuple[StageWorkers, dict]:
    """The stage workers, and what on_done reported: each ended stage's outcome, in the order they were reported."""
    ended: dict = {}
    workers = StageWorkers(lambda warm_up: runner, workers=count,
                           on_done=lambda name, outcome, seconds: ended.update({name: outcome}))
    return workers, ended


def _submitted(runner: _HandRunner, name: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while name not in runner.submitted:
        if time.monotonic() > deadline:
            raise TimeoutError(f"stage {name} was not handed over; handed over: {sorted(runner.submitted)}")
        time.sleep(0.001)


def _end(runner: _HandRunner, name: str, error: BaseException | None = None) -> None:
    _submitted(runner, name)
    future = runner.submitted[name][1].wrapped_future
    future.set_exception(error) if error else future.set_result(_outcome(name))


def _raised_by_run(workers: StageWorkers, end_stages) -> BaseException:
    """What run() raised while `end_stages` ended the stages in another thread."""
    ender = threading.Thread(target=end_stages)
    ender.start()
    try:
        workers.run()
    except BaseException as exc:  # noqa: BLE001 — returned for the test's own assertions
        return exc
    finally:
        ender.join()
    raise AssertionError("run() raised nothing")


def test_a_waiting_stage_goes_to_the_worker_freed_the_moment_a_stage_ends():
    from flows.dq import build_audit_tasks  # any module-level flow: the fake runner never runs it

    runner = _HandRunner()
    workers, ended = _workers(runner)
    workers.add("first", build_audit_tasks)
    workers.add("second", build_audit_tasks)
    finished_at: dict[str, float] = {}

    def end_stages():
        for name in ("first", "second"):
            _submitted(runner, name)
            time.sleep(0.3)  # the loop is asleep by now
            finished_at[name] = time.monotonic()
            runner.submitted[name][1].wrapped_future.set_result(_outcome(name))

    ender = threading.Thread(target=end_stages)
    ender.start()
    results = workers.run()
    ender.join()
    assert results == {"first": {"stage": "first"}, "second": {"stage": "second"}}
    assert list(ended) == ["first", "second"]
    assert runner.submitted["second"][0] - finished_at["first"] < HANDOVER_S


def test_from_start_on_stages_go_to_workers_while_the_caller_goes_on_the_highest_priority_first():
    from flows.dq import build_audit_tasks

    runner = _HandRunner()
    workers, _ = _workers(runner)
    workers.add("side", build_audit_tasks)
    workers.start()
    _submitted(runner, "side")  # handed over with run() not called
    workers.add("grows", build_audit_tasks)
    workers.add("fixed", build_audit_tasks, priority=1)
    time.sleep(0.2)
    assert set(runner.submitted) == {"side"}  # one worker, busy
    _end(runner, "side")
    _submitted(runner, "fixed")
    assert "grows" not in runner.submitted  # added first, but of a lower priority
    ender = threading.Thread(target=lambda: [_end(runner, name) for name in ("fixed", "grows")])
    ender.start()
    assert set(workers.run()) == {"side", "grows", "fixed"}
    ender.join()


def test_the_stages_after_a_failed_one_do_not_run_down_the_chain_and_the_failure_is_raised():
    from flows.dq import build_audit_tasks
    from flows.stage_workers import StageNotRun

    runner = _HandRunner()
    workers, ended = _workers(runner, count=2)
    workers.add("broken", build_audit_tasks)
    workers.add("after", build_audit_tasks, after=("broken",))
    workers.add("after_that", build_audit_tasks, after=("after",))
    workers.add("other", build_audit_tasks)
    raised = _raised_by_run(workers, lambda: (_end(runner, "broken", ValueError("stage broke")), _end(runner, "other")))
    assert isinstance(raised, ValueError) and str(raised) == "stage broke"
    assert set(runner.submitted) == {"broken", "other"}
    assert sorted(ended) == ["after", "after_that", "broken", "other"]  # every stage reported, none left waiting
    assert str(ended["after"]) == "broken failed" and str(ended["after_that"]) == "after failed"
    assert isinstance(ended["after"], StageNotRun) and isinstance(ended["after_that"], StageNotRun)


def test_once_closed_no_waiting_stage_is_handed_over():
    from flows.dq import build_audit_tasks

    runner = _HandRunner()
    workers, _ = _workers(runner)
    workers.add("running", build_audit_tasks)
    workers.add("waiting", build_audit_tasks)
    workers.start()
    _submitted(runner, "running")
    workers.close()  # the flow failed before run()
    _end(runner, "running")
    time.sleep(0.2)
    assert set(runner.submitted) == {"running"}


class _BrokenPoolRunner(_HandRunner):
    """A pool that cannot start the stage `broken` (say, its worker process died)."""

    def submit(self, task, parameters):
        if parameters["name"] == "broken":
            raise RuntimeError("pool is broken")
        return super().submit(task, parameters)


def test_a_stage_that_fails_to_start_frees_its_worker_and_its_followers_are_reported_at_once():
    from flows.dq import build_audit_tasks

    runner = _BrokenPoolRunner()
    reported_at: dict[str, float] = {}
    workers = StageWorkers(lambda warm_up: runner, workers=1,
                           on_done=lambda name, outcome, seconds: reported_at.setdefault(name, time.monotonic()))
    workers.add("broken", build_audit_tasks)
    workers.add("after", build_audit_tasks, after=("broken",))
    workers.add("other", build_audit_tasks)
    started = time.monotonic()
    workers.start()
    _submitted(runner, "other")  # the one worker, not taken by the stage that failed to start
    raised = _raised_by_run(workers, lambda: _end(runner, "other"))
    assert isinstance(raised, RuntimeError) and str(raised) == "pool is broken"
    assert set(reported_at) == {"broken", "after", "other"}
    assert reported_at["after"] - started < HANDOVER_S  # not after the dispatcher's 5 s safety-net wake


class _Worker(_HandRunner):
    """One worker of a _Workers: records its stages in the shared runner too."""

    def __init__(self, workers: _Workers, number: int, warm_up: tuple[str, ...]):
        super().__init__()
        self.workers, self.number, self.warm_up, self.closed = workers, number, warm_up, threading.Event()

    def submit(self, task, parameters):
        self.workers.ran_on[parameters["name"]] = self.number
        return self.workers.shared.submit(task, parameters)

    def close(self):
        self.closed.set()


class _Workers:
    """A worker factory: each worker opened, the worker each stage ran on; opening fails while `broken`."""

    def __init__(self):
        self.shared, self.opened, self.ran_on, self.broken = _HandRunner(), [], {}, False

    def __call__(self, warm_up: tuple[str, ...]) -> _Worker:
        if self.broken:
            raise OSError("cannot start a process")
        self.opened.append(_Worker(self, len(self.opened), warm_up))
        return self.opened[-1]


def test_a_fresh_worker_stage_runs_in_a_new_worker_that_imports_its_module_and_the_used_one_exits():
    from flows.dq import build_audit_tasks
    from flows.fhir_view import build_fhir

    factory = _Workers()
    workers = StageWorkers(factory, workers=2, on_done=lambda *ended: None, warm_up=("flows.dq", "flows.fhir_view"))
    assert [w.warm_up for w in factory.opened] == [("flows.dq", "flows.fhir_view")] * 2
    workers.add("side", build_audit_tasks)
    workers.add("other side", build_audit_tasks)
    workers.add("fresh", build_fhir, after=("side",), fresh_worker=True)
    workers.add("late", build_audit_tasks, after=("fresh",))
    workers.start()
    _submitted(factory.shared, "other side")
    _end(factory.shared, "side")
    _submitted(factory.shared, "fresh")
    replaced = factory.opened[factory.ran_on["side"]]
    assert len(factory.opened) == 3 and factory.ran_on["fresh"] == 2  # a third worker, of the fhir stage's module only
    assert factory.opened[2].warm_up == ("flows.fhir_view",)
    assert replaced.closed.wait(HANDOVER_S)  # the worker that ran side exits
    assert not factory.opened[factory.ran_on["other side"]].closed.is_set()
    ender = threading.Thread(target=lambda: [_end(factory.shared, n) for n in ("other side", "fresh", "late")])
    ender.start()
    assert set(workers.run()) == {"side", "other side", "fresh", "late"}
    ender.join()
    assert factory.ran_on["late"] != replaced.number  # never on the worker that exited
    workers.close_workers()
    assert all(worker.closed.is_set() for worker in factory.opened)


def test_a_fresh_worker_stage_takes_a_worker_that_ran_no_stage_which_other_stages_leave_free():
    from flows.dq import build_audit_tasks
    from flows.fhir_view import build_fhir

    factory = _Workers()
    workers = StageWorkers(factory, workers=2, on_done=lambda *ended: None)
    workers.add("side", build_audit_tasks)
    workers.start()
    _end(factory.shared, "side")
    workers.add("plain", build_audit_tasks, after=("side",))  # added first: takes the worker that ran side
    workers.add("fresh", build_fhir, after=("side",), fresh_worker=True)
    _submitted(factory.shared, "fresh")
    assert factory.ran_on["plain"] == factory.ran_on["side"] != factory.ran_on["fresh"]
    assert len(factory.opened) == 2 and not any(worker.closed.is_set() for worker in factory.opened)
    _end(factory.shared, "plain")
    _end(factory.shared, "fresh")
    assert set(workers.run()) == {"side", "plain", "fresh"}


def test_a_fresh_worker_that_fails_to_open_fails_its_stage_and_the_used_worker_stays():
    from flows.dq import build_audit_tasks
    from flows.fhir_view import build_fhir
    from flows.stage_workers import StageNotRun

    factory = _Workers()
    ended: dict = {}
    workers = StageWorkers(factory, workers=1, on_done=lambda name, outcome, seconds: ended.update({name: outcome}))
    workers.add("side", build_audit_tasks)
    workers.add("fresh", build_fhir, after=("side",), fresh_worker=True)
    workers.add("after fresh", build_audit_tasks, after=("fresh",))
    workers.add("other", build_audit_tasks, after=("side",))
    workers.start()
    _submitted(factory.shared, "side")
    factory.broken = True
    raised = _raised_by_run(workers, lambda: (_end(factory.shared, "side"), _end(factory.shared, "other")))
    assert isinstance(raised, OSError) and str(raised) == "cannot start a process"
    assert isinstance(ended["after fresh"], StageNotRun)
    assert factory.ran_on["other"] == factory.ran_on["side"] == 0  # the one worker, kept
    assert len(factory.opened) == 1 and not factory.opened[0].closed.is_set()
