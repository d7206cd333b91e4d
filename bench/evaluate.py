"""Evaluation harness throughput: trials per second through the evaluate-agents flow (mapped Prefect tasks, parquet
parts, metric table) with the oracle agent — only the harness — and with an LLM agent talking to a scripted model
server with zero latency (tests/gold_policy.py: it follows the gold, so the run must also score 100 %; in a process of
its own, as a real endpoint is) — the harness plus the agent machinery: HTTP calls, tools, sandboxed SQL, the
simulated user.

    uv run python bench/evaluate.py [--trials 1000] [--agents oracle,llm] [--build latest] [--data-dir DIR]

Runs the flow on a temporary Prefect server against a build (default: the latest of ./data), with enough tasks
and trials per task to reach --trials per agent, in fresh run folders under a temporary directory; prints per agent
wall time, trials per second, harness overhead per trial (the wall time during which no trial was running: flow
start-up, planning, batch writes, the metric table; trials run concurrently, so the sum of their latencies exceeds
the wall time and cannot be subtracted from it), the mean number of trials in flight, success rate and model
requests, then peak RSS and a JSON line. Goal (issue 7): 1,000 trials <= 60 s on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from machine_speed import before_and_after, machine_speed

REPO = Path(__file__).resolve().parents[1]
GOAL_S = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--agents", default="oracle,llm", help="comma-separated: oracle, llm")
    parser.add_argument("--concurrency", type=int, default=4, help="LLM trials in flight against the server")
    parser.add_argument("--build", default="latest")
    parser.add_argument("--data-dir", type=Path, default=REPO / "data")
    options = parser.parse_args()
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from ehrbench.stack.prefect_server import use_server_settings

    use_server_settings()  # what every Prefect server of ehrbench's runs with (the harness's reads them)
    import duckdb
    from prefect.testing.utilities import prefect_test_harness

    from ehrbench.evaluation.tasks import load_tasks
    from ehrbench.layout import BuildLayout, DataLayout
    from flows.evaluate import evaluate_agents

    build_dir = DataLayout(root=options.data_dir.resolve()).build_folder(options.build).resolve()
    if not BuildLayout(build_dir).manifest.is_file():
        raise SystemExit(f"no build at {build_dir}; run `make build` first (or --build / --data-dir)")
    per_suite = 50
    speed = {"before": machine_speed()}
    suites = ["ehrsql", "chatqa", "fhir"]
    tasks = len(load_tasks(build_dir, tuple(suites), per_suite))
    trials_per_task = max(1, round(options.trials / tasks))
    results = {}
    with tempfile.TemporaryDirectory() as scratch, prefect_test_harness(server_startup_timeout=300), \
            scripted_server(build_dir) as server:
        data = Path(scratch)
        (data / "benchmarks").symlink_to(build_dir.parent)
        for agent in options.agents.split(","):
            spec = "oracle" if agent == "oracle" else f"llm:scripted@{server.base_url}"
            requests_before = server.requests()
            clock, started = time.perf_counter(), time.time()
            folder = evaluate_agents(build=build_dir.name, suites=suites, agents=[spec], trials=trials_per_task,
                                     limit=per_suite, run_id=f"bench-{agent}", data_dir=str(data),
                                     agent_options={"max_retries": 0} if agent != "oracle" else None,
                                     concurrency_per_endpoint=options.concurrency,
                                     report=False)  # the harness alone (bench/report.py times the dashboard)
            wall = time.perf_counter() - clock
            done, agent_s, success = duckdb.sql(f"select count(*), sum(latency_s), avg(reward) "
                                                f"from '{folder}/part-*.parquet'").fetchone()
            intervals = duckdb.sql(f"select epoch(started_at), epoch(ended_at) "
                                   f"from '{folder}/part-*.parquet'").fetchall()
            busy = busy_seconds(intervals)
            first, last = min(s for s, _ in intervals) - started, started + wall - max(e for _, e in intervals)
            r = results[agent] = {
                "trials": done, "wall_s": round(wall, 2), "trials_per_s": round(done / wall, 1),
                "overhead_ms_per_trial": round(1000 * max(wall - busy, 0.0) / done, 2),
                "trials_in_flight": round(agent_s / busy, 2) if busy else None, "success_rate": round(success, 4),
                "idle_before_s": round(first, 2), "idle_between_s": round(max(wall - busy - first - last, 0.0), 2),
                "idle_after_s": round(last, 2),
                "model_requests": server.requests() - requests_before}
            print(f"{agent}: {done} trials in {r['wall_s']} s ({r['trials_per_s']}/s; "
                  f"goal 1,000 in <= {GOAL_S:.0f} s); harness overhead {r['overhead_ms_per_trial']} ms/trial "
                  f"(no trial running: {r['idle_before_s']} s before the first, {r['idle_between_s']} s between "
                  f"trials, {r['idle_after_s']} s after the last); {r['trials_in_flight']} trials in flight on "
                  f"average; "
                  f"success {r['success_rate']:.2%}; {r['model_requests']} model requests")
    results["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    results["machine_speed"] = {**speed, "after": machine_speed()}
    print(f"peak RSS {results['peak_rss_mib']} MiB")
    print(before_and_after(results["machine_speed"]))
    print(json.dumps(results))


class ScriptedEndpoint:
    """The scripted server's address, and how many requests it has answered (asked over a pipe)."""

    def __init__(self, base_url: str, connection):
        self.base_url, self._connection = base_url, connection

    def requests(self) -> int:
        self._connection.send("count")
        return self._connection.recv()


@contextmanager
def scripted_server(build_dir: Path) -> Iterator[ScriptedEndpoint]:
    """The scripted model server (tests/gold_policy.py) in a process of its own, as a real endpoint is: in the
    harness's process its request handling and gold-following took the interpreter from the trials (GIL)."""
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(target=_serve, args=(str(build_dir), theirs), daemon=True)
    process.start()
    try:
        if not ours.poll(120):
            raise SystemExit("the scripted model server did not start within 120 s")
        yield ScriptedEndpoint(ours.recv(), ours)
    finally:
        with suppress(BrokenPipeError, EOFError):
            ours.send("stop")
        process.join(10)
        if process.is_alive():
            process.kill()


def _serve(build_dir: str, connection) -> None:
    sys.path.insert(0, str(REPO))
    from tests.gold_policy import GoldPolicy
    from tests.llm_servers import OpenAIServer

    with OpenAIServer() as server:
        server.respond(GoldPolicy(Path(build_dir)))
        connection.send(server.base_url)
        while connection.recv() != "stop":
            connection.send(len(server.requests))


def busy_seconds(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of (start, end) intervals: the time during which at least one trial ran.

    >>> busy_seconds([(0, 2), (1, 3), (5, 6)])
    4.0
    """
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


if __name__ == "__main__":
    main()
