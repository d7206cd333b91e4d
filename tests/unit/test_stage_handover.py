"""StageWorkers (flows/stage_workers.py) hands a waiting stage to a worker as soon as a running one ends, not on a
poll: with a runner whose futures the test completes by hand, the next stage is submitted within a small fraction of
a second of the end of the one before it (a poll each second would miss that most of the time)."""

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


def test_a_waiting_stage_goes_to_the_worker_freed_the_moment_a_stage_ends():
    from flows.dq import build_audit_tasks  # any module-level flow: the fake runner never runs it

    runner, ended = _HandRunner(), []
    workers = StageWorkers(runner, workers=1, on_done=lambda name, outcome, seconds: ended.append(name))
    workers.add("first", build_audit_tasks)
    workers.add("second", build_audit_tasks)
    finished_at: dict[str, float] = {}

    def end_stages():
        for name in ("first", "second"):
            while name not in runner.submitted:
                time.sleep(0.001)
            time.sleep(0.3)  # the loop is asleep by now
            finished_at[name] = time.monotonic()
            runner.submitted[name][1].wrapped_future.set_result(_outcome(name))

    ender = threading.Thread(target=end_stages)
    ender.start()
    results = workers.run()
    ender.join()
    assert results == {"first": {"stage": "first"}, "second": {"stage": "second"}}
    assert ended == ["first", "second"]
    assert runner.submitted["second"][0] - finished_at["first"] < HANDOVER_S
