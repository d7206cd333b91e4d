"""Giving the memory a finished stage freed back to the system, in a process that lives on to run other stages.

A stage worker ran dq or meds and then fhir or questions: what the first stage freed stayed in the worker's
allocators, so the demo build's peak, with two workers each in their second stage, counted it again (the dq stage,
run in a Prefect test server's process: +244 MiB after it ended, +125 MiB once released; glibc kept ~50 MiB in its
heap and Arrow's memory pool ~60 MiB)."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys
from functools import cache


def release_freed_memory() -> None:
    """Collect cyclic garbage, then return the free pages of Arrow's memory pool (if pyarrow is loaded) and of the C
    heap (glibc's malloc_trim; nothing elsewhere) to the system. Costs milliseconds; the pages are faulted in again
    when next needed."""
    gc.collect()
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:
        pyarrow.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim():
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    return getattr(ctypes.CDLL(name), "malloc_trim", None)  # glibc's; musl and others have none
