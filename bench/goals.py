"""Every speed goal of issue 23 measured in one go: the benches behind `make bench`, `make bench-scaleup`,
`make bench-evaluate`, `make bench-fhir` and `make bench-profiles`, each run --runs times (or with --runs builds),
then one table: each goal's figure as median (range), and whether it is met.

    uv run python bench/goals.py [--runs 3] [--only demo,scaleup,evaluate,fhir,profiles] [--data-dir DIR]
                                 [--scaleup-factors 1,10,100]

Each bench runs in a process of its own, one after the other (never two at once: they share the 2 cores), and
prints its own report as it goes; this script keeps the JSON line each prints last. The machine's speed
(bench/machine_speed.py) is read before and after everything: figures of a slow hour say so. `evaluate` needs a
published build in --data-dir (`make demo`). The test suite's goal is `.ci/run` on a clean clone, not run here.
Writes the figures to data/bench/goals-<UTC time>.json. Takes ~1.5 h on a fast day (the x100 builds most of it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from build_demo import GOAL_GIB as DEMO_GOAL_GIB
from build_demo import GOAL_SECONDS as DEMO_GOAL_SECONDS
from build_demo import spread
from machine_speed import before_and_after, machine_speed
from profiles import GOAL_SPEEDUP as PROFILE_GOAL_SPEEDUP
from scaleup_build import GOAL_GIB as X100_GOAL_GIB
from scaleup_build import GOAL_SECONDS as X100_GOAL_SECONDS

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
BENCHES = ("demo", "scaleup", "evaluate", "fhir", "profiles")


def run_bench(script: str, *arguments: str) -> dict:
    """Run bench/<script> with `arguments`; its last stdout line, as JSON. Its report goes on to this terminal."""
    done = subprocess.run([sys.executable, str(BENCH / script), *arguments], cwd=REPO, stdout=subprocess.PIPE,
                          text=True)
    lines = done.stdout.strip().splitlines()
    print("\n".join(lines[:-1]), flush=True)
    if done.returncode or not lines:
        raise SystemExit(f"bench/{script} {' '.join(arguments)} failed (exit code {done.returncode})")
    return json.loads(lines[-1])


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def demo_rows(runs: int) -> list[tuple[str, str, str, str]]:
    builds = run_bench("build_demo.py", "--runs", str(runs), "--builds-only")["builds"]
    walls, peaks = [b["wall"] for b in builds], [b["peak_all_gib"] for b in builds]
    return [("demo build, wall s", spread(walls), f"<= {DEMO_GOAL_SECONDS}",
             verdict(statistics.median(walls) <= DEMO_GOAL_SECONDS)),
            ("demo build, all processes GiB", spread(peaks, 2), f"<= {DEMO_GOAL_GIB}",
             verdict(statistics.median(peaks) <= DEMO_GOAL_GIB))]


def scaleup_rows(runs: int, factor_list: str) -> list[tuple[str, str, str, str]]:
    factors = run_bench("scaleup_build.py", "--factors", factor_list, "--runs", str(runs))["factors"]
    rows = []
    for factor in factors:
        walls = [b["wall_s"] for b in factor["builds"]]
        peaks = [b["peak_gib"] for b in factor["builds"]]
        goal = factor["factor"] == 100
        rows += [(f"x{factor['factor']} whole build, wall s", spread(walls), f"<= {X100_GOAL_SECONDS}" if goal else "",
                  verdict(statistics.median(walls) <= X100_GOAL_SECONDS) if goal else ""),
                 (f"x{factor['factor']} whole build, GiB", spread(peaks, 2), f"<= {X100_GOAL_GIB}" if goal else "",
                  verdict(statistics.median(peaks) <= X100_GOAL_GIB) if goal else "")]
    for before, after in zip(factors, factors[1:], strict=False):
        rows += growth_rows(before, after)
    return rows


def growth_rows(before: dict, after: dict) -> list[tuple[str, str, str, str]]:
    """Each stage's growth in wall and CPU seconds from one factor to the next over the patients' rows' (1: linear)."""
    rows_growth = after["patient_rows"] / before["patient_rows"]
    rows = []
    for measure in ("seconds", "cpu_seconds"):
        ratios = {name: (stage[measure]["median"] / before["stages"][name][measure]["median"]) / rows_growth
                  for name, stage in after["stages"].items()
                  if name in before["stages"] and before["stages"][name][measure]["median"] > 0}
        worst = max(ratios, key=ratios.get)
        rows.append((f"x{before['factor']} -> x{after['factor']}: fastest-growing stage's {measure.replace('_', ' ')}",
                     f"{worst} {ratios[worst]:.2f}", "<= 1.00", verdict(ratios[worst] <= 1.0)))
    return rows


def evaluate_rows(runs: int, data_dir: Path) -> list[tuple[str, str, str, str]]:
    # imported here, like fhir below: bench's evaluate.py would stand for any package of that name in this process
    from evaluate import GOAL_S as TRIALS_GOAL_SECONDS

    results = [run_bench("evaluate.py", "--agents", "llm", "--data-dir", str(data_dir))["llm"] for _ in range(runs)]
    walls, trials = [r["wall_s"] for r in results], min(r["trials"] for r in results)  # whole tasks: >= 1,000
    return [(f"{trials:,} LLM-agent trials, wall s", spread(walls), f"<= {TRIALS_GOAL_SECONDS:.0f}",
             verdict(statistics.median(walls) <= TRIALS_GOAL_SECONDS and trials >= 1000))]


def fhir_rows(runs: int) -> list[tuple[str, str, str, str]]:
    # imported here: bench/fhir.py, once imported, stands for the fhir package (fhir.resources) in this process
    from fhir import GOAL_PER_S as FHIR_GOAL_PER_S

    runs_views = [run_bench("fhir.py", "--factors", "10")["views"] for _ in range(runs)]
    rows = []
    for view in dict.fromkeys(result["view"] for results in runs_views for result in results):
        rates = [r["generated_per_s_nodes"] for results in runs_views for r in results if r["view"] == view]
        rows.append((f"FHIR x10 {view}, resources/s", spread(rates, 0), f">= {FHIR_GOAL_PER_S:,}",
                     verdict(statistics.median(rates) >= FHIR_GOAL_PER_S)))
    return rows


def profiles_rows(runs: int) -> list[tuple[str, str, str, str]]:
    result = run_bench("profiles.py", "--repeat", str(runs))
    return [("ehrsql2024 profile alone on the demo, times as fast as the anchor", f"{result['speedup_a_wall']:.2f}",
             f">= {PROFILE_GOAL_SPEEDUP:g}", verdict(result["speedup_a_wall"] >= PROFILE_GOAL_SPEEDUP))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs (or builds) of each bench; median and range")
    parser.add_argument("--only", default=",".join(BENCHES), help=f"comma-separated, of: {', '.join(BENCHES)}")
    parser.add_argument("--data-dir", type=Path, default=REPO / "data", help="the published build evaluate runs on")
    parser.add_argument("--scaleup-factors", default="1,10,100", help="the goal is x100's; fewer for a quick look")
    options = parser.parse_args()
    chosen = options.only.split(",")
    if unknown := sorted(set(chosen) - set(BENCHES)):
        parser.error(f"--only: unknown {unknown}; expected some of {', '.join(BENCHES)}")
    if options.runs < 1:
        parser.error("--runs must be >= 1")

    speed = {"before": machine_speed()}
    measured = {"demo": lambda: demo_rows(options.runs),
                "scaleup": lambda: scaleup_rows(options.runs, options.scaleup_factors),
                "evaluate": lambda: evaluate_rows(options.runs, options.data_dir),
                "fhir": lambda: fhir_rows(options.runs), "profiles": lambda: profiles_rows(options.runs)}
    rows = [row for name in BENCHES if name in chosen for row in measured[name]()]
    speed["after"] = machine_speed()

    print(f"\nIssue 23's goals, {options.runs} run(s) each: median (range)")
    print(before_and_after(speed))
    width = max(len(row[0]) for row in rows)
    for what, figure, goal, met in rows:
        print(f"  {what:<{width}}  {figure:>28}  {goal:>10}  {met}")
    print("  the test suite: `.ci/run` on a clean clone (<= 15 min), not run here")
    out = REPO / "data" / "bench" / f"goals-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"runs": options.runs, "machine_speed": speed,
                               "goals": [dict(zip(("what", "figure", "goal", "met"), row, strict=True))
                                         for row in rows]}, indent=1))
    print(f"figures written to {out}")


if __name__ == "__main__":
    main()
