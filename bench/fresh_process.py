"""Run one bench step in a fresh Python process, so that its wall time includes the interpreter start and its
imports, and its peak RSS is its own. The step's code fills a dict `out` with its figures; the child prints it
with its peak RSS as the last line of stdout."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

EPILOGUE = """
out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def run_fresh(code: str, args: dict, label: str) -> dict:
    """Run `code` (which must import json, resource and define `out`) with `args` as JSON in sys.argv[1]; return
    its figures plus `wall_s`. A failing step raises RuntimeError naming `label` with the end of its stderr."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code + EPILOGUE, json.dumps(args)],
                          capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - started
    if done.returncode:
        raise RuntimeError(f"{label} failed:\n{done.stderr[-3000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "wall_s": wall}
