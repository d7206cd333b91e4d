"""A stage's wall and CPU seconds, for the build manifest.

Stages run side by side on a build's cores (the flow's process and the stage workers), so a stage's wall time also
counts the time it waited for a core another stage held; its CPU seconds do not. Both together say whether a stage
that got slower did more work or shared the machine more (`bench/scaleup_build.py` reports the growth of each).
"""

from __future__ import annotations

import resource
import time
from datetime import UTC, datetime

from ehrbench.manifest import StageTiming


def process_cpu_seconds() -> float:
    """User and system CPU seconds of this process (all its threads: DuckDB's too) and of its child processes that
    have ended and been waited for (the FHIR validation processes)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


class StageClock:
    """Started as a stage starts in this process; `timing()` as it ends. A stage run in the flow's own process also
    counts the CPU of that process's other threads meanwhile (Prefect's, the stage workers' dispatcher; they mostly
    wait)."""

    def __init__(self) -> None:
        self.started_at = datetime.now(UTC)
        self._wall = time.perf_counter()
        self._cpu = process_cpu_seconds()

    def seconds(self) -> float:
        return time.perf_counter() - self._wall

    def timing(self) -> StageTiming:
        return StageTiming(started_at=self.started_at, seconds=round(self.seconds(), 3),
                           cpu_seconds=round(process_cpu_seconds() - self._cpu, 3))
