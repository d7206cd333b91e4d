"""The memory of a process and all its descendants while it runs: a build's CLI, its temporary Prefect server, its
stage workers and their children, summed with shared pages counted once (PSS)."""

from __future__ import annotations

import contextlib
import threading
import time

import psutil

SAMPLE_SECONDS = 0.25  # every process's RSS (/proc/<pid>/statm: a few counters)
# each process's PSS (/proc/<pid>/smaps_rollup): a walk of its page tables under its mmap lock, ~70 ms of kernel time
# for a 4 GB process; read every 0.25 s it cost the x100 build ~half a core and stalled the build's own allocations
PSS_SECONDS = 5.0


class TreeMemory:
    """Samples the summed proportional set size (PSS: a page shared by n processes counts 1/n in each) of a process
    and all its descendants in a thread, with wall-clock times.

    Every SAMPLE_SECONDS each process's RSS is read; its PSS only every PSS_SECONDS (and when first seen). Between, a
    process's PSS is its RSS less what its last reading found shared (RSS - PSS): private pages, what a build's
    memory grows by, count fully in both, and the shared pages' share changes slowly (libraries, the forked
    workers' pages)."""

    def __init__(self, pid: int):
        self.root = psutil.Process(pid)
        self.samples: list[tuple[float, int]] = []
        self.at_peak: dict[str, int] = {}  # each process's part of the highest sample: "<what it runs> [pid]" -> bytes
        # (pid, start time) -> (time of its last PSS reading, RSS - PSS then)
        self._shared: dict[tuple[int, float], tuple[float, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                processes = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            now, total, parts = time.time(), 0, {}
            for process in processes:
                with contextlib.suppress(psutil.Error):  # ended between listing and reading
                    parts[process] = self._pss(process, now)
                    total += parts[process]
            if total > max((sampled for _, sampled in self.samples), default=-1):
                self.at_peak = {_label(process): size for process, size in parts.items()}
            self.samples.append((now, total))
            self._stop.wait(SAMPLE_SECONDS)

    def _pss(self, process: psutil.Process, now: float) -> int:
        key = (process.pid, process.create_time())
        read_at, shared = self._shared.get(key, (float("-inf"), 0))
        if now - read_at >= PSS_SECONDS:
            full = process.memory_full_info()
            self._shared[key] = (now, full.rss - full.pss)
            return full.pss
        return max(0, process.memory_info().rss - shared)

    def peak_parts(self, at_least: int = 20 * 2**20) -> str:
        """The processes' parts of the highest sample, largest first (those of at least `at_least` bytes), e.g.
        "build [812] 1.08, stage worker [840] 0.45, …" in GiB."""
        parts = sorted(self.at_peak.items(), key=lambda item: -item[1])
        return ", ".join(f"{label} {size / 2**30:.2f}" for label, size in parts if size >= at_least)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def peak_gib(self, start: float = float("-inf"), end: float = float("inf")) -> float:
        return max((rss for t, rss in self.samples if start <= t <= end), default=0) / 2**30


def _label(process: psutil.Process) -> str:
    """What a build's process is: the build's own (the CLI), a stage worker (multiprocessing's spawn), the temporary
    Prefect server (uvicorn), else its program's name."""
    with contextlib.suppress(psutil.Error):
        command = " ".join(process.cmdline())
        for marker, label in (("spawn_main", "stage worker"), ("uvicorn", "Prefect server"),
                              (" build", "build")):
            if marker in command:
                return f"{label} [{process.pid}]"
        return f"{process.name()} [{process.pid}]"
    return f"[{process.pid}]"
