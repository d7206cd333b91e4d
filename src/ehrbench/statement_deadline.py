"""A statement's time limit: DuckDB has no statement timeout of its own, so a statement is interrupted from another
thread once its time is up. SQLite's gold queries too (`Connection.interrupt`, SQLite's `sqlite3_interrupt`): its own
way, a progress handler, calls Python every few thousand instructions, and each call waits for the GIL.

One watchdog thread per process keeps every pending deadline, instead of a `threading.Timer` per statement: a thread
started per query (the questions stage runs ~1,400 gold queries per database), each start waiting until the new
thread has run.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress


class Deadline:
    """One statement's deadline; `fired` once its interrupt was called."""

    __slots__ = ("at", "fired", "_interrupt")

    def __init__(self, at: float, interrupt: Callable[[], object]) -> None:
        self.at = at
        self.fired = False
        self._interrupt: Callable[[], object] | None = interrupt

    def cancel(self) -> None:
        """The statement ended: its interrupt is never called after this returns."""
        with _watchdog().changed:
            self._interrupt = None  # nor is its cursor kept alive until the deadline


def interrupt_after(timeout_s: float, interrupt: Callable[[], object]) -> Deadline:
    """Call `interrupt` (say, a DuckDB cursor's) once `timeout_s` has passed, unless the deadline is cancelled first."""
    deadline = Deadline(time.monotonic() + timeout_s, interrupt)
    _watchdog().add(deadline)
    return deadline


@contextmanager
def interrupted_after(timeout_s: float, interrupt: Callable[[], object]) -> Iterator[Deadline]:
    """`interrupt_after` for the statements run inside the block; cancelled as the block ends."""
    deadline = interrupt_after(timeout_s, interrupt)
    try:
        yield deadline
    finally:
        deadline.cancel()


class _Watchdog:
    """The pending deadlines in a heap, earliest first, and the thread that waits for the earliest."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self._pending: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()  # ties keep the order they were added in
        threading.Thread(target=self._run, name="ehrbench-statement-deadlines", daemon=True).start()

    def add(self, deadline: Deadline) -> None:
        with self.changed:
            heapq.heappush(self._pending, (deadline.at, next(self._order), deadline))
            if self._pending[0][2] is deadline:  # the thread waits for a later one: wake it
                self.changed.notify()

    def _run(self) -> None:
        with self.changed:
            while True:
                now = time.monotonic()
                while self._pending and (self._pending[0][0] <= now or self._pending[0][2]._interrupt is None):
                    deadline = heapq.heappop(self._pending)[2]
                    interrupt, deadline._interrupt = deadline._interrupt, None
                    if interrupt is not None:
                        deadline.fired = True
                        with suppress(Exception):  # a cursor closed meanwhile has nothing left to stop
                            interrupt()
                self.changed.wait(self._pending[0][0] - now if self._pending else None)


_the_watchdog: _Watchdog | None = None
_creating = threading.Lock()


def _watchdog() -> _Watchdog:
    global _the_watchdog
    if _the_watchdog is None:
        with _creating:
            if _the_watchdog is None:
                _the_watchdog = _Watchdog()
    return _the_watchdog


def _forget_in_child() -> None:
    """A forked child has no copy of the parent's thread: it starts its own watchdog when it needs one."""
    global _the_watchdog, _creating
    _the_watchdog, _creating = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)
