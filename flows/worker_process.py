"""A stage worker's process (flows/stage_workers.py): a Prefect process pool of one process, set up to run stages
below the flow's priority and to write nothing to stdout; what it logs reaches this process's handlers too."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from contextlib import suppress
from datetime import datetime
from typing import Any

from prefect.task_runners import ProcessPoolTaskRunner

from ehrbench.garbage_collection import collect_in_larger_batches, keep_what_is_loaded
from flows.warm_up import import_modules


class WorkerProcess:
    """A stage worker: a Prefect process pool of one process (a pool of several keeps each of them until the whole
    pool closes; a stage worker can be replaced on its own). With `warm_up`, its process starts at once and imports
    those modules."""

    def __init__(self, warm_up: tuple[str, ...] = ()):
        self._runner = ProcessPoolTaskRunner(max_workers=1, subprocess_message_processor_factories=[_run_logs_here],
                                             initializer=_set_up_worker, initargs=(warm_up,))
        self._runner.__enter__()
        if warm_up:
            self._start()

    def submit(self, task: Any, parameters: dict[str, Any]) -> Any:
        return self._runner.submit(task, parameters)

    def _start(self) -> None:
        """Start the process now rather than with the first stage: a call of nothing, sent to the pool's executor, not
        through `submit`, which would record it as a task run (a Prefect without that attribute starts it late)."""
        executor = getattr(self._runner, "_executor", None)
        if executor is not None:
            executor.submit(os.getpid)

    def let_exit(self) -> None:
        """Every stage has ended: the process may exit (~1.5 s: it flushes its logs to the API and unloads its
        libraries) while this process writes the manifest and publishes, instead of after. `close` still joins it."""
        executor = getattr(self._runner, "_executor", None)
        if executor is not None:
            executor.shutdown(wait=False)

    def close(self) -> None:
        self._runner.__exit__(None, None, None)


WORKER_NICENESS = 10  # below the flow's own process: its dbt run is the build's critical path while workers run


def _set_up_worker(modules: tuple[str, ...] = ()) -> None:
    """A worker writes nothing to stdout, where the CLI prints the published folder: whatever a library prints there
    (Python or native code) goes to stderr. It runs at a lower priority than the flow's process, so that the stages
    started while the databases stage's dbt run goes on take the cores it leaves idle, not its own (the workers are
    all equal among themselves). Then it imports `modules`, which its garbage collector no longer walks, and collects
    in larger batches (ehrbench.garbage_collection)."""
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    with suppress(OSError):
        os.nice(WORKER_NICENESS)
    collect_in_larger_batches()
    import_modules(modules)
    keep_what_is_loaded()


def _run_logs_here() -> Callable[[str, Any], tuple[str, Any]]:
    """A forwarded run log also goes to this process's own handlers of the run loggers (build.log, the CLI's
    terminal); Prefect's handlers are skipped: its API handler gets the log from the forwarder, its console handler
    already printed it in the worker."""

    def process(message_type: str, payload: Any) -> tuple[str, Any]:
        if message_type == "log" and isinstance(payload, dict) and payload.get("name"):
            _emit_here(_log_record(payload))
        return message_type, payload

    return process


def _log_record(payload: dict) -> logging.LogRecord:
    level = int(payload.get("level") or logging.INFO)
    record = logging.makeLogRecord({"name": payload["name"], "levelno": level, "levelname": logging.getLevelName(level),
                                    "msg": str(payload.get("message", "")), "args": None})
    timestamp = payload.get("timestamp")
    with suppress(ValueError):  # a timestamp Prefect did not write as ISO 8601: the record's own time
        record.created = datetime.fromisoformat(str(timestamp)).timestamp() if timestamp else record.created
    return record


def _emit_here(record: logging.LogRecord) -> None:
    logger: logging.Logger | None = logging.getLogger(record.name)
    while logger is not None:
        for handler in logger.handlers:
            if not type(handler).__module__.startswith("prefect.") and record.levelno >= handler.level:
                handler.handle(record)
        logger = logger.parent if logger.propagate else None
