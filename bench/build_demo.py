"""Cold demo build: wall time and peak RSS per stage, and for the whole CLI build (with each stage's CPU seconds, and
the memory of all the build's processes together).

    uv run python bench/build_demo.py [--runs 3] [--mimic-iv-dir DIR] [--eicu-dir DIR]

Each stage runs in its own fresh Python process through the library (no Prefect), in order, on a
new data directory, so its time includes its imports and its peak RSS is its own. Then the whole
pipeline runs --runs times (default 3) through `ehrbench build`, each in a new data directory with its own
temporary Prefect server on a new database; per stage the median and range of the runs. The user's cache folder
(EHRBENCH_CACHE_DIR: dbt's parse of the project, the temporary server's migrated database) is kept, as a new data
directory on a machine that built before finds it; --cold-caches gives each run an empty one instead, as the first
build on a machine (it parses the project and migrates the template database).
Goal as the pipeline grows: <= 60 s and <= 2 GiB on 2 cores for both demos.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fresh_process import run_fresh
from machine_speed import before_and_after, machine_speed
from tree_memory import TreeMemory

from ehrbench.build_summary import stages_wall_seconds
from ehrbench.manifest import StageTiming

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
GOAL_SECONDS, GOAL_GIB = 60, 2  # issue 23: the median of the builds, all their processes together

STAGES = {
    "ingest": """
from ehrbench.sources import release_for
from ehrbench.sources.ingest import ingest_release
from ehrbench.warehouse import connect
with connect(layout.warehouse) as con:
    for dataset, folder in (("mimic_iv", args["mimic_iv_dir"]), ("eicu", args["eicu_dir"])):
        ingest_release(con, release_for(dataset), Path(folder), origin="local")
""",
    "transform": """
from ehrbench.transform import run_dbt, staging_selection
run_dbt(["build", "--select", *staging_selection()], warehouse=layout.warehouse, work_dir=layout.dbt_work)
""",
    "validate": """
import json
from ehrbench.validation import load_suite, validate_suite
for name in ("staging_mimic_iv", "staging_eicu"):
    result = validate_suite(load_suite(Path(args["repo"]) / "expectations" / f"{name}.json"), layout.warehouse,
                            absent_sources=["vitalperiodic", "nursecharting"])
    assert result.success, result.failed
""",
    "databases": """
from ehrbench.export import export_schema
from ehrbench.profiles import BENCHMARK_DATABASES, PROFILE_SELECTION, profile_vars
from ehrbench.transform import run_dbt
run_dbt(["build", "--select", *PROFILE_SELECTION], warehouse=layout.warehouse, work_dir=layout.dbt_work,
        vars=profile_vars(0))
for db in BENCHMARK_DATABASES:
    export_schema(layout.warehouse, db.schema, *db.files(layout.root / "build"))
""",
}

PRELUDE = """
import json, resource, sys, time
from pathlib import Path
args = json.loads(sys.argv[1])
from ehrbench.layout import DataLayout
layout = DataLayout(root=Path(args["data_dir"]))
"""
def run_stage(name: str, args: dict) -> dict:
    try:
        figures = run_fresh(PRELUDE + "out = {}\n" + STAGES[name], args, f"stage {name}")
    except RuntimeError as err:
        sys.exit(str(err))
    return {"stage": name, "seconds": round(figures.pop("wall_s"), 1), **figures}


def cli_build(tmp: Path, run: int, args: dict, cold_caches: bool = False) -> dict:
    """One `ehrbench build` in a new data directory with a new PREFECT_HOME (so its temporary Prefect server starts
    on a new database, as in a new data directory): wall time, the manifest's stage times, peak RSS of its
    processes. `cold_caches`: an empty cache folder of its own, as on a machine that never built."""
    env = {**os.environ, "PREFECT_HOME": str(tmp / f"prefect-{run}"), "DO_NOT_TRACK": "1",
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180"}
    if cold_caches:
        env["EHRBENCH_CACHE_DIR"] = str(tmp / f"cache-{run}")
    env.pop("PREFECT_API_URL", None)
    started = time.perf_counter()
    build = subprocess.Popen([str(Path(sys.executable).with_name("ehrbench")), "build", "--data-dir",
                              str(tmp / f"cli-{run}"), "--mimic-iv-dir", args["mimic_iv_dir"],
                              "--eicu-dir", args["eicu_dir"]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env, cwd=REPO)
    memory = TreeMemory(build.pid)
    stdout, stderr = build.communicate()
    memory.stop()
    wall = time.perf_counter() - started
    if build.returncode:
        sys.exit(f"ehrbench build failed:\n{stderr[-3000:]}")
    manifest = json.loads((Path(stdout.strip().splitlines()[-1]) / "manifest.json").read_text())
    timings = {name: StageTiming.model_validate(timing) for name, timing in manifest["stages"].items()}
    stages = {name: timing.seconds for name, timing in timings.items()}
    shutil.rmtree(tmp / f"cli-{run}", ignore_errors=True)
    # fhir, questions, dq, noteqa and meds run side by side: outside the stages is what their span does not cover
    return {"wall": wall, "stages": stages, "outside_stages": wall - stages_wall_seconds(timings),
            "cpu": {name: timing.cpu_seconds for name, timing in timings.items()},
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            "peak_all_gib": memory.peak_gib(), "peak_parts": memory.peak_parts()}


def spread(values: list[float], digits: int = 1) -> str:
    """Median and range, e.g. "28.4 (26.1-30.2)"."""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mimic-iv-dir", default=os.environ.get("EHRBENCH_MIMIC_IV_DIR")
                        or SHARED / "mimic-iv-demo-2.2")
    parser.add_argument("--eicu-dir", default=os.environ.get("EHRBENCH_EICU_DIR") or SHARED / "eicu-demo-2.0.1")
    parser.add_argument("--runs", type=int, default=3, help="whole builds through the CLI (median and range)")
    parser.add_argument("--cold-caches", action="store_true",
                        help="an empty cache folder per build (a first build on the machine)")
    parser.add_argument("--builds-only", action="store_true", help="skip the library stages in fresh processes")
    options = parser.parse_args()
    env_note = f"{os.cpu_count()} cores, Python {sys.version.split()[0]}"
    speed = {"before": machine_speed()}

    with tempfile.TemporaryDirectory(prefix="ehrbench-bench-") as tmp:
        args = {"data_dir": str(Path(tmp) / "stages"), "repo": str(REPO),
                "mimic_iv_dir": str(options.mimic_iv_dir), "eicu_dir": str(options.eicu_dir)}
        rows = [] if options.builds_only else [run_stage(name, args) for name in STAGES]
        builds = [cli_build(Path(tmp), run, args, options.cold_caches) for run in range(options.runs)]
    speed["after"] = machine_speed()

    print(f"Cold demo build ({env_note})")
    print(before_and_after(speed))
    if rows:
        print(f"{'stage':<12}{'seconds':>10}{'peak RSS MiB':>15}   (library only, each in a fresh process)")
        for row in rows:
            print(f"{row['stage']:<12}{row['seconds']:>10.1f}{row['peak_rss_mib']:>15.0f}")
        print(f"{'sum':<12}{sum(r['seconds'] for r in rows):>10.1f}{max(r['peak_rss_mib'] for r in rows):>15.0f}")
        print()
    caches = "an empty cache folder each time" if options.cold_caches else "the user's cache folder"
    print(f"ehrbench build, {len(builds)} run(s): seconds, median (min-max); temporary Prefect server on a new "
          f"database each time; {caches}")
    print(f"  {'no stage':<10}{spread([b['outside_stages'] for b in builds]):>20}   imports, starting the temporary "
          "Prefect server, the build's summary")
    for name in builds[0]["stages"]:
        print(f"  {name:<10}{spread([b['stages'][name] for b in builds]):>20}   CPU "
              f"{spread([b['cpu'][name] for b in builds])}")
    print(f"  {'wall':<10}{spread([b['wall'] for b in builds]):>20}   peak RSS of any process "
          f"{max(b['peak_rss_mib'] for b in builds):.0f} MiB; all the build's processes together (PSS) "
          f"{spread([b['peak_all_gib'] for b in builds], digits=2)} GiB")
    for run, build in enumerate(builds, 1):
        print(f"  run {run}'s peak, {build['peak_all_gib']:.2f} GiB, by process (GiB): {build['peak_parts']}")
    print(json.dumps({"machine_speed": speed, "stages_library": rows, "builds": builds}))


if __name__ == "__main__":
    main()
