"""Report dashboards: how long the DuckDB aggregation and the site rendering take for a large run and its nightly
series, and how big the site is.

    uv run python bench/report.py [--tasks 200] [--trials 5] [--agents 3] [--runs 30] [--bootstrap 1000]
                                  [--build latest] [--data-dir DIR]

Writes synthetic runs (seeded rewards, ten-message transcripts with tool calls) for the question ids of a real
build (default: the latest of ./data, so facets and gold are real; synthetic ids without one): --tasks per question
suite plus every dq task, --trials per task, --agents agents, --runs nightly runs of that size (the trend series).
Then times `report_data` (current run, trends) and `render_site` in this process, and prints the figures and a JSON
line. Everything goes to a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def transcript(rng: random.Random) -> str:
    messages = [{"role": "system", "content": "You answer questions over a clinical database. " * 20},
                {"role": "user", "content": "How many patients were admitted last year?"}]
    for step in range(4):
        call = {"id": f"c{step}", "type": "function",
                "function": {"name": "sql_execute", "arguments": json.dumps({"query": "select count(*) from t"})}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"c{step}", "content": str([[rng.randint(0, 999)]] * 20)}]
    return json.dumps(messages)


def task_ids(build: Path | None, per_suite: int) -> list[tuple[str, str]]:
    if build is None:
        return [(s, f"{s}-{i}") for s in ("ehrsql", "chatqa", "fhir") for i in range(per_suite)] + [
            ("dq", f"dq-{i}") for i in range(12)]
    import pyarrow.parquet as pq

    from ehrbench.layout import BuildLayout

    layout = BuildLayout(build)
    rows = pq.read_table(layout.questions, columns=["suite", "question_id"]).to_pylist()
    ids = [(s, sorted(r["question_id"] for r in rows if r["suite"] == s)[:per_suite]) for s in ("ehrsql", "chatqa",
                                                                                                  "fhir")]
    return [(s, i) for s, chosen in ids for i in chosen] + [
        ("dq", task.task_id) for task in layout.dq_tasks()]


def run_rows(tasks, trials: int, agents: int, build_id: str, rng: random.Random) -> list[dict]:
    rows = []
    for a in range(agents):
        skill = 0.4 + 0.2 * a
        for suite, task in tasks:
            for k in range(trials):
                status = rng.choices(["completed", "error", "invalid"], [0.93, 0.05, 0.02])[0]
                reward = None if status == "invalid" else float(status == "completed" and rng.random() < skill)
                rows.append({"build_id": build_id, "suite": suite, "db": "mimic_iv", "task_id": task, "trial": k,
                             "agent": f"agent-{a}", "status": status, "reward": reward, "correct": bool(reward),
                             "is_answerable": suite != "dq", "abstained": False, "answer": "[['1']]",
                             "predicted_sql": "select 1", "retrieval_precision": rng.random() if suite == "fhir"
                             else None, "retrieval_recall": rng.random() if suite == "fhir" else None,
                             "dq_recall": rng.random() if suite == "dq" else None,
                             "dq_precision": rng.random() if suite == "dq" else None,
                             "input_tokens": 2000, "output_tokens": 300, "cost_usd": 0.001, "latency_s": 2.0,
                             "transcript": transcript(rng)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="tasks per question suite")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--runs", type=int, default=30, help="nightly runs in the trend series")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--build", default="latest")
    parser.add_argument("--data-dir", type=Path, default=REPO / "data")
    options = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from ehrbench.evaluation.results import ResultStore
    from ehrbench.layout import BuildLayout
    from ehrbench.reports.assemble import report_data
    from ehrbench.reports.model import Bootstrap
    from ehrbench.reports.site import render_site

    build = (options.data_dir / "benchmarks" / options.build).resolve()
    build = build if BuildLayout(build).manifest.is_file() else None
    build_id = build.name if build else "synthetic"
    tasks = task_ids(build, options.tasks)
    rng = random.Random(0)
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        root = Path(tmp)
        benchmarks = root / "benchmarks"
        benchmarks.mkdir()
        if build:
            (benchmarks / build_id).symlink_to(build)
        clock = time.perf_counter()
        run_ids = [f"nightly-202611{day:02d}T020000Z" for day in range(1, options.runs + 1)]
        for run_id in run_ids:
            ResultStore(root / "results", run_id).write(run_rows(tasks, options.trials, options.agents, build_id, rng))
        trials = len(tasks) * options.trials * options.agents
        print(f"{options.runs} runs of {trials:,} trials ({len(tasks)} tasks, {options.agents} agents, "
              f"{options.trials} trials) written in {time.perf_counter() - clock:.1f} s (not timed below)")
        bootstrap = Bootstrap(options.bootstrap, 0, 0.95)
        clock = time.perf_counter()
        single = report_data(root / "results", run_ids[-1], benchmarks, bootstrap=bootstrap, prefix=None,
                             max_trend_runs=1)
        single_s = time.perf_counter() - clock
        clock = time.perf_counter()
        data = report_data(root / "results", run_ids[-1], benchmarks, bootstrap=bootstrap)
        data_s = time.perf_counter() - clock
        clock = time.perf_counter()
        report_data(root / "results", run_ids[-1], benchmarks, bootstrap=bootstrap)
        cached_s = time.perf_counter() - clock
        clock = time.perf_counter()
        index = render_site(data, root / "site")
        render_s = time.perf_counter() - clock
        files = [p for p in index.parent.rglob("*") if p.is_file()]
        size_mb = sum(p.stat().st_size for p in files) / 2**20
        rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"aggregation of one run (leaderboards with {options.bootstrap} bootstrap replicates, breakdowns, "
              f"curves, failing tasks, {len(single.tasks)} task details): {single_s:.2f} s")
        print(f"with the trend over {len(data.trend_runs)} runs: {data_s:.2f} s the first time (each earlier run's "
              f"leaderboard computed and kept), {cached_s:.2f} s with the kept ones; "
              f"{sum(p.change == 'regression' for p in data.trends)} regressions flagged among "
              f"{sum(p.change is not None or p.run_id != data.trend_runs[0] for p in data.trends)} comparisons "
              "(the synthetic runs all draw from the same distribution: every flag is a false alarm)")
        print(f"rendering: {render_s:.2f} s, {len(files):,} files, {size_mb:.1f} MiB; peak RSS {rss_mib:.0f} MiB")
        print(json.dumps({"trials_per_run": trials, "runs": options.runs, "bootstrap": options.bootstrap,
                          "aggregate_one_run_s": round(single_s, 2), "aggregate_with_trend_s": round(data_s, 2),
                          "aggregate_with_kept_trend_s": round(cached_s, 2),
                          "render_s": round(render_s, 2), "files": len(files), "site_mib": round(size_mb, 1),
                          "peak_rss_mib": round(rss_mib)}))


if __name__ == "__main__":
    main()
