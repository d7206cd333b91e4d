"""The build's later stages side by side (flows/stage_workers.py), with toy stage flows on a real Prefect server and a
real process pool: they run at once in other processes (at a lower priority), `start()` hands them over while the
caller goes on, `after` orders them, their logs reach this process's handlers, a failure ends the run only once
every stage has ended, and a `fresh_worker` stage runs in a new process while the worker it replaced exits."""

from __future__ import annotations

import logging
import os
import sys
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


class _CapturedFds:
    """What this process and the workers it starts write to file descriptors 1 and 2 (a module fixture cannot use
    pytest's capfd)."""

    def __enter__(self):
        import tempfile

        sys.stdout.flush()
        sys.stderr.flush()
        self._files = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
        self._saved = [os.dup(1), os.dup(2)]
        for fd, file in zip((1, 2), self._files, strict=True):
            os.dup2(file.fileno(), fd)
        return self

    def __exit__(self, *exc):
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved in zip((1, 2), self._saved, strict=True):
            os.dup2(saved, fd)
            os.close(saved)
        self.out, self.err = (self._read(file) for file in self._files)

    @staticmethod
    def _read(file) -> str:
        file.seek(0)
        text = file.read().decode(errors="replace")
        file.close()
        return text


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


@flow(name="toy-stage-early")
def early(folder: Path) -> dict:
    (folder / "early").write_text(str(os.getpid()))
    return {"pid": os.getpid(), "niceness": os.getpriority(os.PRIO_PROCESS, 0)}


@flow(name="toy-stage-fails")
def fails(message: str) -> None:
    raise ValueError(message)


@flow(name="toy-stage-fresh")
def in_fresh_worker(folder: Path) -> dict:
    """The pids of the processes a and b ran in (the pool's two workers), and which of them has exited since."""
    import psutil

    first = {int((folder / name).read_text()) for name in "ab"}
    deadline = time.monotonic() + WAIT_S
    while all(psutil.pid_exists(pid) for pid in first) and time.monotonic() < deadline:
        time.sleep(0.05)
    return {"pid": os.getpid(), "first": sorted(first), "exited": sorted(p for p in first if not psutil.pid_exists(p))}


@flow(name="toy-stage-now")
def whoami() -> int:
    return os.getpid()


@flow(name="toy-parent")
def run_stages(folder: Path) -> tuple[BaseException | None, dict, dict]:
    """now runs in a worker while this flow waits, broken now fails so (run_now, as the build's validate); early is
    started and has run before run() is called; a and b meet (b stays 3 s longer); c comes after a, d has no stage
    before it, broken fails, e comes after broken, fresh comes after c and d in a worker of its own. Returns what
    run() raised and each stage's outcome (or error) as reported when it ended, and what run_now returned or
    raised."""
    from flows.stage_workers import stage_workers

    ended: dict = {}
    run_now: dict = {}
    with stage_workers(on_done=lambda name, outcome, seconds: ended.update({name: (outcome, seconds)}),
                       max_workers=2) as workers:
        run_now["now"] = workers.run_now("now", whoami)
        try:
            workers.run_now("broken now", fails, message="broke while the flow waited")
        except Exception as exc:
            run_now["broken now"] = exc
        workers.add("early", early, folder=folder)
        workers.start()
        try:
            workers.run_now("too late", whoami)
        except RuntimeError as exc:
            run_now["too late"] = exc
        _wait_for(folder / "early")  # handed to a worker by start(), with run() not called yet
        workers.add("a", meets, folder=folder, mine="a", theirs="b")
        workers.add("b", meets, folder=folder, mine="b", theirs="a", linger_s=3)
        workers.add("c", after_the_others, after=("a",), folder=folder)
        workers.add("d", after_the_others, folder=folder)
        workers.add("broken", fails, message="stage broke")
        workers.add("e", after_the_others, after=("broken",), folder=folder)
        workers.add("fresh", in_fresh_worker, after=("c", "d"), fresh_worker=True, folder=folder)
        try:
            workers.run()
        except Exception as exc:
            return exc, ended, run_now
    return None, ended, run_now


@pytest.fixture(scope="module")
def stages_run(prefect_api_url, tmp_path_factory, run_log):
    """One run of the toy stages for the tests here (a process pool per run is seconds of a busy machine)."""
    folder = tmp_path_factory.mktemp("stages")
    capture = _CapturedFds()
    with capture:
        raised, ended, run_now = run_stages(folder)
    return {"raised": raised, "ended": ended, "run_now": run_now, "folder": folder, "out": capture.out,
            "err": capture.err, "log": list(run_log)}


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


def test_stages_run_at_once_in_other_processes_in_order_and_log_here(stages_run):
    ended = stages_run["ended"]
    a, b, c, d = (ended[name][0].result for name in "abcd")
    assert len({a["pid"], b["pid"], os.getpid()}) == 3  # a and b met: two worker processes, not this one
    # a ends first: c (after a) goes to its worker before d, which was added after c and waited since the start
    assert a["ended"] <= c["started"] < d["started"] and c["saw"] == ["a", "b", "early"]
    assert all(outcome.timing.seconds >= 0 and seconds >= outcome.timing.seconds
               for outcome, seconds in (ended[name] for name in "abcd"))
    messages = [r.getMessage() for r in stages_run["log"] if r.levelno == logging.WARNING]
    assert "stage a met b" in messages and "stage b met a" in messages  # logged in workers, handled here
    for pid in (c["pid"], d["pid"]):  # stdout is the CLI's answer: what a worker prints goes to stderr
        assert f"stage output {pid}" in stages_run["err"] and f"stage output {pid}" not in stages_run["out"]


def test_a_started_stage_ran_before_run_was_called_below_this_processs_priority(stages_run):
    from flows.worker_process import WORKER_NICENESS

    outcome = stages_run["ended"]["early"][0].result
    assert outcome["pid"] != os.getpid()
    assert outcome["niceness"] == min(19, os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICENESS)


def test_a_failed_stage_fails_the_run_after_the_others_end_and_its_followers_do_not_run(stages_run):
    from flows.stage_workers import StageNotRun

    raised, ended = stages_run["raised"], stages_run["ended"]
    assert isinstance(raised, ValueError) and str(raised) == "stage broke"
    assert set(ended) - {"now", "broken now"} == {"early", "a", "b", "c", "d", "broken", "e", "fresh"}  # all ended
    assert isinstance(ended["broken"][0], ValueError)
    assert isinstance(ended["e"][0], StageNotRun) and str(ended["e"][0]) == "broken failed"
    assert f"stage output {ended['d'][0].result['pid']}" in stages_run["err"]  # d ran; e did not
    assert stages_run["err"].count("stage output") == 2


def test_run_now_runs_a_stage_in_a_worker_while_the_flow_waits_and_raises_its_error(stages_run):
    ended, returned = stages_run["ended"], stages_run["run_now"]
    assert returned["now"] != os.getpid() and ended["now"][0].result == returned["now"]  # reported as it ended
    assert ended["now"][0].timing.cpu_seconds is not None
    error = returned["broken now"]
    assert isinstance(error, ValueError) and str(error) == "broke while the flow waited"
    assert ended["broken now"][0] is error
    # after start() a worker may be busy with a handed-over stage: refused, nothing reported
    assert "run_now() after start()" in str(returned["too late"]) and "too late" not in ended


def test_the_pool_has_prefects_size_else_one_worker_per_core(prefect_api_url):
    from prefect.settings import PREFECT_TASKS_RUNNER_PROCESS_POOL_MAX_WORKERS, temporary_settings

    from flows.stage_workers import stage_workers

    with stage_workers(on_done=lambda *ended: None) as workers:
        assert workers.workers == os.cpu_count()
    with temporary_settings({PREFECT_TASKS_RUNNER_PROCESS_POOL_MAX_WORKERS: 1}), \
            stage_workers(on_done=lambda *ended: None) as workers:
        assert workers.workers == 1


@flow(name="toy-stage-modules")
def loaded_modules(names: list[str]) -> list[str]:
    return [name for name in names if name in sys.modules]


@flow(name="toy-stage-garbage-collector")
def garbage_collector() -> dict:
    import gc

    return {"threshold": list(gc.get_threshold()), "frozen": gc.get_freeze_count()}


def test_warmed_up_workers_start_with_the_pool_import_their_modules_and_exit_after_run(prefect_api_url):
    import multiprocessing

    from ehrbench.garbage_collection import OLDER_GENERATIONS, YOUNG_GENERATION
    from flows.stage_workers import stage_workers

    ended: dict = {}
    # wave and sndhdr: standard modules that neither Prefect nor ehrbench imports
    with stage_workers(on_done=lambda name, outcome, seconds: ended.update({name: outcome}), max_workers=1,
                       warm_up=("wave",)) as workers:
        deadline = time.monotonic() + WAIT_S
        while not multiprocessing.active_children():  # before any stage is added
            assert time.monotonic() < deadline, "the warmed-up pool started no worker"
            time.sleep(0.05)
        workers.add("modules", loaded_modules, names=["wave", "sndhdr"])
        workers.add("garbage collector", garbage_collector)
        workers.run()
        deadline = time.monotonic() + WAIT_S  # every stage has ended: its worker exits, the pool still open
        while multiprocessing.active_children():
            assert time.monotonic() < deadline, "the worker did not exit once every stage had ended"
            time.sleep(0.05)
    assert ended["modules"].result == ["wave"]
    # the worker collects in larger batches, and no longer walks what it had loaded once warmed up
    assert ended["garbage collector"].result["threshold"] == [YOUNG_GENERATION, *OLDER_GENERATIONS]
    assert ended["garbage collector"].result["frozen"] > 10_000


def test_a_fresh_worker_stage_runs_in_a_new_process_and_the_worker_it_replaced_exits(stages_run):
    ended = stages_run["ended"]
    fresh = ended["fresh"][0].result
    earlier = {ended[name][0].result["pid"] for name in ("early", "a", "b", "c", "d")} | {stages_run["run_now"]["now"]}
    assert earlier == set(fresh["first"])  # two workers ran every stage before it
    assert fresh["pid"] not in earlier and fresh["pid"] != os.getpid()
    assert len(fresh["exited"]) == 1  # one of them exited while the fresh stage ran; the other stayed for the rest
