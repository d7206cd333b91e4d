"""A stage's CPU seconds: its process's threads and the child processes it waited for, not the time it waited."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from ehrbench.stage_clock import StageClock

BUSY = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass"


def burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_waiting_counts_as_wall_time_only():
    clock = StageClock()
    time.sleep(0.4)
    timing = clock.timing()
    assert timing.seconds >= 0.4
    assert timing.cpu_seconds < 0.1


def test_cpu_of_other_threads_and_of_waited_for_child_processes_counts():
    clock = StageClock()
    thread = threading.Thread(target=burn, args=(0.3,))  # process time: every thread's, at least this thread's 0.3 s
    thread.start()
    thread.join()
    subprocess.run([sys.executable, "-c", BUSY.format(seconds=0.5)], check=True)  # a FHIR validation process
    timing = clock.timing()
    assert timing.cpu_seconds >= 0.3 + 0.5
    assert timing.cpu_seconds <= timing.seconds * 1.5  # not counted twice (the child ran alone, on one core)


def test_cpu_before_the_clock_started_is_not_counted():
    burn(0.3)
    subprocess.run([sys.executable, "-c", BUSY.format(seconds=0.3)], check=True)
    clock = StageClock()
    assert clock.timing().cpu_seconds < 0.1
