"""Progress for people: a line per stage and a count of trials, instead of thousands of log lines.

Flows report progress twice: to their Prefect run logger (the run's logs in the UI, `--watch`, a worker's log) and to
`PROGRESS`, a plain logger that Prefect never sees and that nobody listens to unless a terminal does. The CLI turns
Prefect's own console output off and shows `PROGRESS` with `TerminalProgress`: stage lines and warnings as plain
lines, trials as a bar (a line per tenth when the output is not a terminal)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

PROGRESS = logging.getLogger("ehrbench.progress")
PROGRESS.propagate = False  # never twice in a worker's log, never to Prefect's API
PROGRESS.addHandler(logging.NullHandler())
PROGRESS.setLevel(logging.INFO)

# Prefect's loggers of run logs: their warnings and errors are shown too, as one line each.
RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")
ANNOUNCED = "ehrbench_announced"  # marks a run-log record that PROGRESS carries too (shown once)


@dataclass(frozen=True)
class TrialCount:
    done: int
    total: int
    failed: int

    def describe(self) -> str:
        share = self.done / self.total if self.total else 1.0
        return f"trials: {self.done:,} of {self.total:,} done ({share:.0%}), {self.failed:,} failed"


def report_trials(count: TrialCount) -> None:
    PROGRESS.info(count.describe(), extra={"trials": count})


class TerminalProgress(logging.Handler):
    def __init__(self, console: Console):
        super().__init__(logging.INFO)
        self.console = console
        self._bar: Progress | None = None
        self._bar_task: TaskID | None = None
        self._tenths_shown = 0  # the run announced its trials; the first line comes at a tenth

    def emit(self, record: logging.LogRecord) -> None:
        try:
            count = getattr(record, "trials", None)
            if getattr(record, ANNOUNCED, False):
                return
            if isinstance(count, TrialCount):
                self._trials(count)
            elif record.name == PROGRESS.name:
                self._line(record.getMessage())
            elif record.levelno == logging.WARNING:  # a run's warning: its first line
                message = record.getMessage().strip().splitlines()
                self._line(f"warning: {message[0] if message else ''}")
            # a run's errors are not repeated here: the failing stage's line and the command's error say it once
        except Exception:
            self.handleError(record)

    def _line(self, text: str) -> None:
        # user text, printed as it is: no Rich markup, no emoji codes (`llm:gemini:…`)
        (self._bar.console if self._bar else self.console).print(text, markup=False, emoji=False, highlight=False,
                                                                 soft_wrap=True)

    def _trials(self, count: TrialCount) -> None:
        if not self.console.is_terminal:
            tenths = 10 * count.done // max(count.total, 1)
            if tenths > self._tenths_shown:
                self._tenths_shown = tenths
                self._line(count.describe())
            return
        if self._bar is None:
            self._bar = Progress(TextColumn("trials"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(),
                                 console=self.console)
            self._bar.start()
            self._bar_task = self._bar.add_task("trials", total=count.total, failed=0)
        self._bar.update(self._bar_task, completed=count.done, total=count.total, failed=count.failed)
        if count.done >= count.total:  # done: the bar stays as it ends, the next lines print below it
            self._bar.stop()
            self._bar = None

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        super().close()


@contextmanager
def terminal_progress(console: Console) -> Iterator[TerminalProgress]:
    """Show the progress of the flows run inside this block on `console`."""
    handler = TerminalProgress(console)
    loggers = [PROGRESS, *(logging.getLogger(name) for name in RUN_LOGGERS)]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
        handler.close()


@contextmanager
def log_to_file(path: Path) -> Iterator[None]:
    """Every run log and progress line of the flows run inside this block, also in `path` (a build's build.log):
    the terminal shows a line per stage, the file keeps the details and the tracebacks."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    handler.addFilter(lambda record: not getattr(record, ANNOUNCED, False))  # its PROGRESS copy is written
    loggers = [PROGRESS, *(logging.getLogger(name) for name in RUN_LOGGERS)]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
        handler.close()
