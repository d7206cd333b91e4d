"""Whole-build scale-up: `ehrbench build` on the MIMIC-IV demo replicated xf with new ids; each stage's time, memory.

    uv run python bench/scaleup_build.py [--factors 1,10,100] [--runs N] [--work-dir DIR] [--keep]
                                         [--mimic-iv-dir DIR] [--eicu-dir DIR]

Per factor f, under --work-dir (default data/bench/, gitignored; deleted afterwards unless --keep):
1. untimed: the MIMIC-IV demo is ingested into a scratch warehouse, f-1 id-shifted copies of its patient tables are
   appended (bench/scaleup.py's replication), and every table is written back out as the release's gzip CSV file
   (hosp/, icu/, the documented column order), with a SHA256SUMS.txt so that the build verifies them as it would a
   release's files;
2. timed, --runs times (default 1): `ehrbench build` on those files and the eICU demo (not replicated), with the
   build's default settings, each in a new data directory with its temporary Prefect server on a new database and the
   user's cache folder kept (as `make bench`). The memory of the build's process tree (the CLI, the temporary Prefect
   server, the stage workers, ...) is summed every quarter second, shared pages counted once (PSS; see
   bench/tree_memory.py for how it is sampled cheaply).
Reports per factor and stage, medians over the runs: seconds and CPU seconds (the build manifest's), the peak of the
tree's summed memory while the stage ran (stages run side by side from databases on, so a stage's peak includes its
neighbours'), and the growth of each stage's time and CPU from the previous factor over the growth of the patients'
rows (the dictionaries' stay one copy: the rows a stage's work grows with). Then a JSON line with every build.

Goal (issue 23): x100 (10,000 patients, ~70 M raw rows) in <= 10 min and <= 8 GiB in all, and no stage whose time
grows faster than its rows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from fresh_process import run_fresh
from machine_speed import before_and_after, machine_speed
from tree_memory import TreeMemory

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
GOAL_SECONDS, GOAL_GIB = 600, 8

PREPARE_FILES = """
import json, resource, sys, time
from pathlib import Path
args = json.loads(sys.argv[1])
sys.path.insert(0, args["bench_dir"])
from scaleup import INT32_MAX, replicate
from ehrbench.sources import release_for
from ehrbench.sources.checksums import sha256_file
from ehrbench.sources.ingest import ingest_release
from ehrbench.sources.releases import CHECKSUM_FILE
from ehrbench.warehouse import connect

release, source, folder = release_for("mimic_iv"), Path(args["mimic_iv_dir"]), Path(args["folder"])
scratch = folder.parent / "replica.duckdb"
out = {}
with connect(scratch) as con:
    ingest_release(con, release, source, origin="local")
    out.update(replicate(con, args["factor"]))
    sums, rows = [], 0
    for spec in release.tables:
        if not (source / spec.path).exists():
            continue  # an optional table the demo lacks stays absent
        too_large = [name for name, kind in spec.columns if kind == "INTEGER" and con.execute(
            f'select max("{name}") > {INT32_MAX} from {spec.qualified_name}').fetchone()[0]]
        if too_large:
            raise SystemExit(f"x{args['factor']}: {spec.name}.{too_large} would overflow the documented INTEGER type "
                             "that the build reads the file with; use a smaller factor")
        path = folder / spec.path
        path.parent.mkdir(parents=True, exist_ok=True)
        columns = ", ".join('"' + name + '"' for name, _ in spec.columns)
        con.execute(f"copy (select {columns} from {spec.qualified_name}) to '{path}' "
                    "(format csv, header true, compression gzip)")
        rows += con.execute(f"select count(*) from {spec.qualified_name}").fetchone()[0]
        sums.append(f"{sha256_file(path)}  {spec.path}")
scratch.unlink()
(folder / CHECKSUM_FILE).write_text("\\n".join(sums) + "\\n")
out["raw_rows"] = rows
out["files_gib"] = sum(p.stat().st_size for p in folder.rglob("*.csv.gz")) / 2**30
"""


def timed_build(folder: Path, mimic_iv_dir: Path, eicu_dir: Path) -> dict:
    """`ehrbench build` on the replicated files in a new data directory and Prefect home: wall seconds, per stage
    seconds, CPU seconds and tree memory, the whole tree's peak."""
    for state in ("data", "prefect"):
        shutil.rmtree(folder / state, ignore_errors=True)
    env = {**os.environ, "PREFECT_HOME": str(folder / "prefect"), "DO_NOT_TRACK": "1",
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180"}
    env.pop("PREFECT_API_URL", None)
    command = [str(Path(sys.executable).with_name("ehrbench")), "build", "--data-dir", str(folder / "data"),
               "--mimic-iv-dir", str(mimic_iv_dir), "--eicu-dir", str(eicu_dir)]
    started = time.perf_counter()
    with open(folder / "build.log", "w") as log:
        build = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=REPO)
        memory = TreeMemory(build.pid)
        stdout, _ = build.communicate()
        memory.stop()
    wall = time.perf_counter() - started
    if build.returncode:
        raise RuntimeError(f"ehrbench build failed (exit {build.returncode}); its logs are kept beside {folder}")
    manifest = json.loads((Path(stdout.strip().splitlines()[-1]) / "manifest.json").read_text())
    stages = {}
    for name, timing in manifest["stages"].items():
        start = datetime.fromisoformat(timing["started_at"]).timestamp()
        stages[name] = {"seconds": timing["seconds"], "cpu_seconds": timing["cpu_seconds"],
                        "peak_gib": memory.peak_gib(start, start + timing["seconds"])}
    return {"wall_s": wall, "peak_gib": memory.peak_gib(), "stages": stages,
            "raw_row_counts": manifest["raw_row_counts"]}


def run_factor(factor: int, options) -> dict:
    """The factor's files, then `options.runs` builds on them."""
    folder = options.work_dir / f"x{factor}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    builds = []
    try:
        prepared = run_fresh(PREPARE_FILES, {"bench_dir": str(Path(__file__).parent), "factor": factor,
                                             "mimic_iv_dir": str(options.mimic_iv_dir),
                                             "folder": str(folder / "mimic-iv")}, f"x{factor} files")
        print(f"x{factor}: {prepared['raw_rows']:,} MIMIC-IV rows written as {prepared['files_gib']:.2f} GiB of "
              f"gzip CSV in {prepared['wall_s']:.0f} s (untimed)", file=sys.stderr, flush=True)
        for run in range(1, options.runs + 1):
            builds.append(timed_build(folder, folder / "mimic-iv", options.eicu_dir))
            print(f"x{factor}: build {run}/{options.runs} in {builds[-1]['wall_s']:.1f} s, peak "
                  f"{builds[-1]['peak_gib']:.2f} GiB", file=sys.stderr, flush=True)
    finally:
        # kept for a failed or slow build: the CLI's output, and the build's logs (every stage's Prefect log lines)
        if (folder / "build.log").exists():
            shutil.copy(folder / "build.log", options.work_dir / f"x{factor}-build.log")
        shutil.rmtree(options.work_dir / f"x{factor}-logs", ignore_errors=True)
        if (folder / "data" / "logs").is_dir():
            shutil.copytree(folder / "data" / "logs", options.work_dir / f"x{factor}-logs")
        if not options.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return {"factor": factor, "mimic_iv_rows": prepared["raw_rows"], "patient_rows": prepared["patient_rows"],
            "files_gib": prepared["files_gib"], "builds": builds, **summarise(builds)}


def summarise(builds: list[dict]) -> dict:
    """Over a factor's builds: the median of each time (and its range), the highest memory."""
    def spread(values: list[float]) -> dict:
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}

    stages = {}
    for name in dict.fromkeys(name for build in builds for name in build["stages"]):
        runs = [build["stages"][name] for build in builds if name in build["stages"]]
        stages[name] = {"seconds": spread([run["seconds"] for run in runs]),
                        "cpu_seconds": spread([run["cpu_seconds"] for run in runs]),
                        "peak_gib": max(run["peak_gib"] for run in runs)}
    return {"wall_s": spread([b["wall_s"] for b in builds]), "peak_gib": spread([b["peak_gib"] for b in builds]),
            "stages": stages}


def growth(now: float, before: float, rows_now: int, rows_before: int) -> str:
    """A time's growth from the previous factor over the rows' growth, to two decimals: 1 is linear; '!' above 1.00
    (grows faster than the data)."""
    ratio = round((now / before) / (rows_now / rows_before), 2)
    return f"{ratio:.2f}" + ("!" if ratio > 1 else "")


def report(rows: list[dict], skipped: dict[int, str]) -> None:
    stages = list(dict.fromkeys(name for row in rows for name in row["stages"]))
    width = 33
    titles = [f"x{row['factor']} ({len(row['builds'])} builds)" for row in rows]
    print(f"{'':<10}" + "".join(f"{title:>{width}}" for title in titles))
    print(f"{'MIMIC rows':<10}" + "".join(f"{r['mimic_iv_rows']:>{width},}" for r in rows))
    print("patients' " + "".join(f"{r['patient_rows']:>{width},}" for r in rows))
    print("stage     " + "".join(f"{'s':>8}{'grow':>6}{'cpu s':>8}{'grow':>6}{'GiB':>5}" for _ in rows))
    for name in stages:
        cells, previous = [], None
        for row in rows:
            stage = row["stages"].get(name)
            if stage is None:
                cells.append(f"{'-':>{width}}")
                continue
            seconds, cpu = stage["seconds"]["median"], stage["cpu_seconds"]["median"]
            time_growth = cpu_growth = ""
            if previous is not None:
                time_growth = growth(seconds, previous[1], row["patient_rows"], previous[0])
                cpu_growth = growth(cpu, previous[2], row["patient_rows"], previous[0])
            cells.append(f"{seconds:>8.1f}{time_growth:>6}{cpu:>8.1f}{cpu_growth:>6}{stage['peak_gib']:>5.2f}")
            previous = (row["patient_rows"], seconds, cpu)
        print(f"{name:<10}" + "".join(cells))
    print(f"{'wall':<10}" + "".join(
        f"{r['wall_s']['median']:>8.1f} ({r['wall_s']['min']:.1f}-{r['wall_s']['max']:.1f}) "
        f"{r['peak_gib']['median']:.2f} ({r['peak_gib']['min']:.2f}-{r['peak_gib']['max']:.2f}) GiB".rjust(width)
        for r in rows))
    for factor, why in skipped.items():
        print(f"x{factor}: not measured: {why}")
    print("s / cpu s = the manifest's stage seconds, wall and CPU (the process that ran it: all its threads and the "
          "child processes it waited for), medians of the builds; grow = growth from the previous factor over the "
          "growth of the patients' rows (those of the tables with a subject_id, which the factor multiplies; the "
          "dictionaries, d_items and the like, stay one copy) (1: linear; ! grows faster than its rows); a stage's "
          "wall time grows faster than its CPU when it shares the cores with more of the other stages; GiB = the "
          "highest peak of the build's processes' summed PSS while the stage ran; wall: median (range) of the builds' "
          f"wall seconds and peaks. Goal at x100: <= {GOAL_SECONDS // 60} min and <= {GOAL_GIB} GiB in all.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--factors", default="1,10,100", help="comma-separated replication factors")
    parser.add_argument("--work-dir", type=Path, default=REPO / "data" / "bench",
                        help="where each factor's files and build go (default data/bench/, gitignored)")
    parser.add_argument("--runs", type=int, default=1,
                        help="builds per factor on the same files (median and range; default 1)")
    parser.add_argument("--keep", action="store_true", help="keep each factor's files and build (default: delete)")
    parser.add_argument("--mimic-iv-dir", type=Path, default=os.environ.get("EHRBENCH_MIMIC_IV_DIR")
                        or SHARED / "mimic-iv-demo-2.2")
    parser.add_argument("--eicu-dir", type=Path, default=os.environ.get("EHRBENCH_EICU_DIR")
                        or SHARED / "eicu-demo-2.0.1")
    options = parser.parse_args()
    factors = [int(f) for f in options.factors.split(",")]
    if any(f < 1 for f in factors):
        parser.error("factors must be >= 1")
    if options.runs < 1:
        parser.error("--runs must be >= 1")
    for flag, folder in (("--mimic-iv-dir", options.mimic_iv_dir), ("--eicu-dir", options.eicu_dir)):
        if not Path(folder).is_dir():
            parser.error(f"{flag}: no folder at {folder}")
    options.work_dir = options.work_dir.resolve() / "scaleup-build"

    load_before = os.getloadavg()[0]  # another process on the 2 cores skews every figure: say so
    speed = {"before": machine_speed()}
    rows: list[dict] = []
    skipped: dict[int, str] = {}
    for factor in factors:
        try:
            rows.append(run_factor(factor, options))
        except RuntimeError as exc:
            skipped[factor] = str(exc).splitlines()[-1]
            print(f"x{factor}: {exc}", file=sys.stderr)
    print(f"Whole-build scale-up: ehrbench build on the MIMIC-IV demo replicated xf and the eICU demo "
          f"({os.cpu_count()} cores, Python {sys.version.split()[0]}, 1-min load average {load_before:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after)")
    speed["after"] = machine_speed()
    print(before_and_after(speed))
    report(rows, skipped)
    print(json.dumps({"machine_speed": speed, "skipped": skipped, "factors": rows}))


if __name__ == "__main__":
    main()
