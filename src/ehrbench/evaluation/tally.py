"""How far a run's trials are, for the person following it: every row moves the terminal's count
(ehrbench.progress), and the run's log gets a line now and then."""

from __future__ import annotations

import time
from collections.abc import Callable

from ehrbench.progress import TrialCount, report_trials


class TrialTally:
    """Trials done and failed of `total`. Every `log_every_s` seconds, and not once the last one is in, `log` gets
    the count (the flow passes its run logger)."""

    def __init__(self, total: int, *, log: Callable[[TrialCount], None] | None = None, log_every_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic):
        self.total, self.done, self.failed = total, 0, 0
        self._log, self._every_s, self._clock = log, log_every_s, clock
        self._started = self._logged = clock()

    def add(self, row: dict) -> TrialCount:
        """Count a trial's result row (status error: failed)."""
        self.done += 1
        self.failed += row.get("status") == "error"
        count = TrialCount(self.done, self.total, self.failed)
        report_trials(count)
        if self._log is not None and self._clock() - self._logged >= self._every_s and self.done < self.total:
            self._logged = self._clock()
            self._log(count)
        return count

    def elapsed(self) -> float:
        return self._clock() - self._started

    def describe(self) -> str:
        return f"{self.done:,} ({self.failed:,} failed) in {self.elapsed():.0f} s"
