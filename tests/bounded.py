"""Hang checks that cannot hang themselves: the call runs in a thread the test waits for with a timeout."""

from __future__ import annotations

import threading
import time


def finished_within(seconds: float, function, *args):
    """(result or exception, elapsed seconds) of function(*args) run in a thread; fails the test when it is still
    running after `seconds` (a hang check that cannot hang itself)."""
    outcome: list = []

    def run() -> None:
        started = time.monotonic()
        try:
            outcome.append(function(*args))
        except Exception as exc:  # noqa: BLE001 - handed to the test to assert on
            outcome.append(exc)
        outcome.append(time.monotonic() - started)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=seconds)
    assert not thread.is_alive(), f"{getattr(function, '__name__', function)} still running after {seconds} s"
    return outcome[0], outcome[1]
