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
    def __init__(self):
        self.submitted: dict[str, tuple[float, _Submitted]] = {}

    def submit(self, task, parameters):
        future = _Submitted()
        self.submitted[parameters["name"]] = (time.monotonic(), future)
        return future


def _outcome(name: str) -> StageOutcome:
    return StageOutcome({"stage": name}, StageTiming(started_at=datetime.now(UTC), seconds=0.0))


def _workers(runner: _HandRunner, count: int = 1) -> tuple[StageWorkers, dict]:
    """The stage workers, and what on_done reported: each ended stage's outcome, in the order they were reported."""
    ended: dict = {}
    workers = StageWorkers(runner, workers=count, on_done=lambda name, outcome, seconds: ended.update({name: outcome}))
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
    workers = StageWorkers(runner, workers=1,
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
