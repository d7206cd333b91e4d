"""The build's later stages side by side (flows/stage_workers.py), with toy stage flows on a real Prefect server and a
real process pool: they run at once in other processes, `after` orders them, their logs reach this process's
handlers, and a failure ends the run only once every stage has ended."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest
from prefect import flow, get_run_logger

pytestmark = pytest.mark.integration

WAIT_S = 60.0


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear: the other stage is not running at the same time")
        time.sleep(0.05)


@flow(name="toy-stage-meets")
def meets(folder: Path, mine: str, theirs: str, linger_s: float = 0.0) -> dict:
    """Leaves a file, then waits for the other stage's: only two stages running at once both end."""
    (folder / mine).write_text(str(os.getpid()))
    _wait_for(folder / theirs)
    get_run_logger().warning("stage %s met %s", mine, theirs)
    time.sleep(linger_s)
    return {"pid": os.getpid(), "ended": time.time()}


@flow(name="toy-stage-after")
def after_the_others(folder: Path) -> dict:
    started = time.time()
    os.write(1, f"stage output {os.getpid()}\n".encode())  # as native code prints: straight to the process's stdout
    return {"pid": os.getpid(), "started": started, "saw": sorted(p.name for p in folder.iterdir())}


@flow(name="toy-stage-fails")
def fails(message: str) -> None:
    raise ValueError(message)


@flow(name="toy-parent")
def run_stages(folder: Path, failing: bool) -> tuple[dict, list]:
    from flows.stage_workers import stage_workers

    ended: list = []
    with stage_workers(on_done=lambda name, outcome, seconds: ended.append((name, outcome, seconds)),
                       max_workers=2) as workers:
        workers.add("a", meets, folder=folder, mine="a", theirs="b")
        workers.add("b", meets, folder=folder, mine="b", theirs="a", linger_s=0 if failing else 3)
        if failing:
            workers.add("broken", fails, message="stage broke")
            workers.add("c", after_the_others, after=("broken",), folder=folder)
        else:  # a ends first: c (after a) goes to its worker before d (added after c, waiting since the start)
            workers.add("c", after_the_others, after=("a",), folder=folder)
            workers.add("d", after_the_others, folder=folder)
        try:
            return workers.run(), ended
        except Exception as exc:
            return {"raised": exc}, ended


@pytest.fixture(scope="module")
def run_log():
    """What this process's handlers of the run loggers see (as build.log's does)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler, loggers = Keep(logging.INFO), [logging.getLogger(n) for n in ("prefect.flow_runs", "prefect.task_runs")]
    for logger in loggers:
        logger.addHandler(handler)
    yield records
    for logger in loggers:
        logger.removeHandler(handler)


def test_stages_run_at_once_in_other_processes_in_order_and_log_here(prefect_api_url, tmp_path, run_log, capfd):
    results, ended = run_stages(tmp_path, failing=False)
    out, err = capfd.readouterr()

    a, b, c, d = (results[name] for name in "abcd")
    assert len({a["pid"], b["pid"], os.getpid()}) == 3  # a and b met: two worker processes, not this one
    assert a["ended"] <= c["started"] < d["started"] and c["saw"] == ["a", "b"]
    assert sorted(name for name, _, _ in ended) == ["a", "b", "c", "d"]
    assert all(outcome.timing.seconds >= 0 and seconds >= outcome.timing.seconds for _, outcome, seconds in ended)
    messages = [r.getMessage() for r in run_log if r.levelno == logging.WARNING]
    assert "stage a met b" in messages and "stage b met a" in messages  # logged in workers, handled here
    for pid in (c["pid"], d["pid"]):  # stdout is the CLI's answer: what a worker prints goes to stderr
        assert f"stage output {pid}" in err and f"stage output {pid}" not in out


def test_a_failed_stage_fails_the_run_after_the_others_end_and_its_followers_do_not_run(prefect_api_url, tmp_path):
    from flows.stage_workers import StageNotRun

    results, ended = run_stages(tmp_path, failing=True)

    assert isinstance(results["raised"], ValueError) and str(results["raised"]) == "stage broke"
    outcomes = {name: outcome for name, outcome, _ in ended}
    assert set(outcomes) == {"a", "b", "broken", "c"}  # every stage ended before the error was raised
    assert outcomes["a"].result["pid"] != outcomes["b"].result["pid"]
    assert isinstance(outcomes["broken"], ValueError)
    assert isinstance(outcomes["c"], StageNotRun) and str(outcomes["c"]) == "broken failed"
    assert not (tmp_path / "c").exists()



def test_the_pool_has_prefects_size_else_one_worker_per_core(prefect_api_url):
    from prefect.settings import PREFECT_TASKS_RUNNER_PROCESS_POOL_MAX_WORKERS, temporary_settings

    from flows.stage_workers import stage_workers

    with stage_workers(on_done=lambda *ended: None) as workers:
        assert workers.workers == os.cpu_count()
    with temporary_settings({PREFECT_TASKS_RUNNER_PROCESS_POOL_MAX_WORKERS: 1}), \
            stage_workers(on_done=lambda *ended: None) as workers:
        assert workers.workers == 1
