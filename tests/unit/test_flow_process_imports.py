"""What the build flow's own process loads: it lives through the whole build, so a library only a stage worker's
stage needs (Great Expectations, ~130 MiB: validate, noteqa and questions run in the workers) stays out of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FLOW_PROCESS = """
import sys
import ehrbench.cli
import flows.build_benchmark
from flows.warm_up import FLOW_IMPORTS, import_modules
import_modules(FLOW_IMPORTS)
print(sorted(name for name in ("great_expectations", "dbt.cli.main") if name in sys.modules))
"""


def test_the_flow_process_imports_dbt_and_never_great_expectations():
    out = subprocess.run([sys.executable, "-c", FLOW_PROCESS], capture_output=True, text=True, cwd=REPO, check=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{REPO}/src:{REPO}", "DO_NOT_TRACK": "1",
                              "HOME": str(Path.home())})
    assert out.stdout.strip().splitlines()[-1] == "['dbt.cli.main']"


def test_the_workers_hold_what_validate_runs_on():
    from flows.warm_up import WORKER_IMPORTS

    assert {"flows.validate", "great_expectations"} <= set(WORKER_IMPORTS)
