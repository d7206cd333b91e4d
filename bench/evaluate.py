"""Evaluation harness throughput: trials per second through the evaluate-agents flow (mapped Prefect tasks, parquet
parts, metric table) with the oracle agent, so that only the harness is measured.

    uv run python bench/evaluate.py [--trials 1000] [--build latest] [--data-dir DIR]

Runs the flow on a temporary Prefect server against a build (default: the latest of ./data), with enough tasks
and trials per task to reach --trials, in a fresh run folder under a temporary directory; prints wall time, trials
per second, harness overhead per trial and peak RSS, then a JSON line. Goal (issue 7): 1,000 trials <= 60 s on 2
cores. (A scripted LLM server for the llm agent comes with that agent.)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL_S = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--build", default="latest")
    parser.add_argument("--data-dir", type=Path, default=REPO / "data")
    options = parser.parse_args()
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from prefect.testing.utilities import prefect_test_harness

    from ehrbench.evaluation.tasks import load_tasks
    from ehrbench.settings import DataLayout
    from flows.evaluate import evaluate_agents

    build_dir = DataLayout(root=options.data_dir.resolve()).build_folder(options.build).resolve()
    if not (build_dir / "manifest.json").is_file():
        raise SystemExit(f"no build at {build_dir}; run `make build` first (or --build / --data-dir)")
    per_suite = 50
    tasks = len(load_tasks(build_dir, ("ehrsql", "chatqa", "fhir"), per_suite))
    trials_per_task = max(1, round(options.trials / tasks))
    with tempfile.TemporaryDirectory() as scratch, prefect_test_harness(server_startup_timeout=300):
        data = Path(scratch)
        (data / "benchmarks").symlink_to(build_dir.parent)
        clock = time.perf_counter()
        folder = evaluate_agents(build=build_dir.name, suites=["ehrsql", "chatqa", "fhir"], agents=["oracle"],
                                 trials=trials_per_task, limit=per_suite, run_id="bench", data_dir=str(data))
        wall = time.perf_counter() - clock
        import duckdb

        done, agent_s = duckdb.sql(f"select count(*), sum(latency_s) from '{folder}/part-*.parquet'").fetchone()
    result = {"trials": done, "wall_s": round(wall, 2), "trials_per_s": round(done / wall, 1),
              "overhead_ms_per_trial": round(1000 * (wall - agent_s) / done, 2),
              "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
              "goal_s_per_1000": GOAL_S}
    print(f"{done} trials in {result['wall_s']} s ({result['trials_per_s']}/s; goal 1,000 in <= {GOAL_S:.0f} s); "
          f"harness overhead {result['overhead_ms_per_trial']} ms/trial; peak RSS {result['peak_rss_mib']} MiB")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
