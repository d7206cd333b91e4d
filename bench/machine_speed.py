"""How fast this machine is right now, printed beside a bench's figures: the same code's demo build has taken 51 s
in one session and 106-135 s in another on the same kind of machine, so figures of different hours compare only
when these readings do.

    uv run python bench/machine_speed.py

Two readings, in a fresh process each time (nothing the bench loaded or freed counts):
- Python's speed: a loop of 10 million integer additions (one core);
- writing to memory not touched before: 1 GiB of NumPy ones, three times, each freed before the next. On a slow day
  the first GiB has taken ~3 s (0.12-4.1 s in ten readings) and the next ones ~0.13 s (pages the kernel had just been
  given back); on a fast day every one ~0.15 s.
"""

from __future__ import annotations

import json
import subprocess
import sys

_READINGS = """
import json, time
import numpy
started = time.perf_counter()
total = 0
for i in range(10_000_000):
    total += i
loop = time.perf_counter() - started
touch = []
for _ in range(3):
    started = time.perf_counter()
    block = numpy.ones(2**30 // 8)
    touch.append(time.perf_counter() - started)
    del block
print(json.dumps({"python_loop_s": round(loop, 3), "first_touch_gib_s": [round(t, 3) for t in touch]}))
"""


def machine_speed() -> dict:
    """{"python_loop_s": seconds for 10 M additions, "first_touch_gib_s": [seconds per new GiB, x3]}."""
    done = subprocess.run([sys.executable, "-c", _READINGS], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def speed_note(speed: dict) -> str:
    touch = " / ".join(f"{seconds:.2f}" for seconds in speed["first_touch_gib_s"])
    return f"Python loop {speed['python_loop_s']:.2f} s per 10 M additions, new memory {touch} s per GiB"


def before_and_after(speed: dict) -> str:
    """The line a bench prints of {"before": reading, "after": reading}."""
    return f"This machine before: {speed_note(speed['before'])}; after: {speed_note(speed['after'])}"


def main() -> None:
    speed = machine_speed()
    print(f"This machine now: {speed_note(speed)}")
    print(json.dumps(speed))


if __name__ == "__main__":
    main()
