"""release_freed_memory gives a finished stage's freed memory back to the system (run in fresh interpreters: a
process's heap depends on all it did before)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

HEAP_FREED_BUT_HELD = """
def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
from ehrbench.freed_memory import release_freed_memory
before = rss_mib()
blocks = [bytes(64 * 1024) for _ in range(3000)]  # ~190 MiB of C heap (below glibc's mmap threshold)
last = blocks[-1]  # keeps the heap's top in use: glibc's free() cannot shrink the heap below it
del blocks
held = rss_mib() - before
release_freed_memory()
print(held, rss_mib() - before)
"""


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc_trim")
def test_freed_heap_memory_goes_back_to_the_system():
    held, after = map(float, subprocess.run([sys.executable, "-c", HEAP_FREED_BUT_HELD], check=True,
                                            capture_output=True, text=True).stdout.split())
    assert held > 100, f"the freed blocks were not held ({held:.0f} MiB): the test shows nothing"
    assert after < held - 100, f"{held:.0f} MiB held, {after:.0f} MiB after the release"


def test_release_loads_no_library():
    script = ("import sys; from ehrbench.freed_memory import release_freed_memory; release_freed_memory(); "
              "print('pyarrow' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                          text=True).stdout.strip() == "False"
