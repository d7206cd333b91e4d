"""Whole-build scale-up: `ehrbench build` on the MIMIC-IV demo replicated xf with new ids; each stage's time, memory.

    uv run python bench/scaleup_build.py [--factors 1,10,100] [--work-dir DIR] [--keep]
                                         [--mimic-iv-dir DIR] [--eicu-dir DIR]

Per factor f, under --work-dir (default data/bench/, gitignored; deleted afterwards unless --keep):
1. untimed: the MIMIC-IV demo is ingested into a scratch warehouse, f-1 id-shifted copies of its patient tables are
   appended (bench/scaleup.py's replication), and every table is written back out as the release's gzip CSV file
   (hosp/, icu/, the documented column order), with a SHA256SUMS.txt so that the build verifies them as it would a
   release's files;
2. timed: `ehrbench build` on those files and the eICU demo (not replicated), with the build's default settings,
   in a new data directory with its temporary Prefect server on a new database and the user's cache folder kept (as
   `make bench`). The memory of the build's process tree (the CLI, the temporary Prefect server, the stage workers,
   ...) is summed every SAMPLE_SECONDS, shared pages counted once (PSS; see TreeMemory for how it is sampled cheaply).
Reports per factor and stage: seconds (the build manifest's), the peak of the tree's summed memory while the stage ran
(stages run side by side from databases on, so a stage's peak includes its neighbours'), and each stage's growth in
time from the previous factor next to the raw rows' growth. Then a JSON line.

Goal (issue 23): x100 (10,000 patients, ~70 M raw rows) in <= 10 min and <= 8 GiB in all, and no stage whose time
grows faster than its rows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import psutil
from fresh_process import run_fresh

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
SAMPLE_SECONDS = 0.25  # every process's RSS (/proc/<pid>/statm: a few counters)
# each process's PSS (/proc/<pid>/smaps_rollup): a walk of its page tables under its mmap lock, ~70 ms of kernel time
# for a 4 GB process; read every 0.25 s it cost the x100 build ~half a core and stalled the build's own allocations
PSS_SECONDS = 5.0
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


class TreeMemory:
    """Samples the summed proportional set size (PSS: a page shared by n processes counts 1/n in each) of a process
    and all its descendants in a thread, with wall-clock times.

    Every SAMPLE_SECONDS each process's RSS is read; its PSS only every PSS_SECONDS (and when first seen). Between, a
    process's PSS is its RSS less what its last reading found shared (RSS - PSS): private pages, what a build's
    memory grows by, count fully in both, and the shared pages' share changes slowly (libraries, the forked
    workers' pages)."""

    def __init__(self, pid: int):
        self.root = psutil.Process(pid)
        self.samples: list[tuple[float, int]] = []
        # (pid, start time) -> (time of its last PSS reading, RSS - PSS then)
        self._shared: dict[tuple[int, float], tuple[float, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                processes = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            now, total = time.time(), 0
            for process in processes:
                with contextlib.suppress(psutil.Error):  # ended between listing and reading
                    total += self._pss(process, now)
            self.samples.append((now, total))
            self._stop.wait(SAMPLE_SECONDS)

    def _pss(self, process: psutil.Process, now: float) -> int:
        key = (process.pid, process.create_time())
        read_at, shared = self._shared.get(key, (float("-inf"), 0))
        if now - read_at >= PSS_SECONDS:
            full = process.memory_full_info()
            self._shared[key] = (now, full.rss - full.pss)
            return full.pss
        return max(0, process.memory_info().rss - shared)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def peak_gib(self, start: float = float("-inf"), end: float = float("inf")) -> float:
        return max((rss for t, rss in self.samples if start <= t <= end), default=0) / 2**30


def timed_build(folder: Path, mimic_iv_dir: Path, eicu_dir: Path) -> dict:
    """`ehrbench build` on the replicated files: wall seconds, per stage seconds and tree memory, the whole
    tree's peak."""
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
        stages[name] = {"seconds": timing["seconds"],
                        "peak_gib": memory.peak_gib(start, start + timing["seconds"])}
    return {"wall_s": wall, "peak_gib": memory.peak_gib(), "stages": stages,
            "raw_row_counts": manifest["raw_row_counts"]}


def run_factor(factor: int, options) -> dict:
    folder = options.work_dir / f"x{factor}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    try:
        prepared = run_fresh(PREPARE_FILES, {"bench_dir": str(Path(__file__).parent), "factor": factor,
                                             "mimic_iv_dir": str(options.mimic_iv_dir),
                                             "folder": str(folder / "mimic-iv")}, f"x{factor} files")
        print(f"x{factor}: {prepared['raw_rows']:,} MIMIC-IV rows written as {prepared['files_gib']:.2f} GiB of "
              f"gzip CSV in {prepared['wall_s']:.0f} s (untimed)", file=sys.stderr, flush=True)
        build = timed_build(folder, folder / "mimic-iv", options.eicu_dir)
        print(f"x{factor}: built in {build['wall_s']:.1f} s, peak {build['peak_gib']:.2f} GiB", file=sys.stderr,
              flush=True)
    finally:
        # kept for a failed or slow build: the CLI's output, and the build's logs (every stage's Prefect log lines)
        if (folder / "build.log").exists():
            shutil.copy(folder / "build.log", options.work_dir / f"x{factor}-build.log")
        shutil.rmtree(options.work_dir / f"x{factor}-logs", ignore_errors=True)
        if (folder / "data" / "logs").is_dir():
            shutil.copytree(folder / "data" / "logs", options.work_dir / f"x{factor}-logs")
        if not options.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return {"factor": factor, "mimic_iv_rows": prepared["raw_rows"], "files_gib": prepared["files_gib"], **build}


def report(rows: list[dict], skipped: dict[int, str]) -> None:
    stages = list(dict.fromkeys(name for row in rows for name in row["stages"]))
    header = "".join(f"{'x' + str(r['factor']):>20}" for r in rows)
    print(f"{'':<10}{header}")
    print(f"{'MIMIC rows':<10}" + "".join(f"{r['mimic_iv_rows']:>20,}" for r in rows))
    print("stage     " + "".join(f"{'s':>9}{'GiB':>6}{'growth':>5}" for _ in rows))
    for name in stages:
        cells, previous = [], None
        for row in rows:
            stage = row["stages"].get(name)
            if stage is None:
                cells.append(f"{'-':>20}")
                continue
            growth = ""
            if previous is not None:
                # time growth over rows growth: 1 is linear, above 1 grows faster than the data
                ratio = (stage["seconds"] / previous[1]["seconds"]) / (row["mimic_iv_rows"] / previous[0])
                growth = f"{ratio:.2f}" + ("!" if ratio > 1 else "")
            cells.append(f"{stage['seconds']:>9.1f}{stage['peak_gib']:>6.2f}{growth:>5}")
            previous = (row["mimic_iv_rows"], stage)
        print(f"{name:<10}" + "".join(cells))
    print(f"{'wall':<10}" + "".join(f"{r['wall_s']:>9.1f}{r['peak_gib']:>6.2f}{'':>5}" for r in rows))
    for factor, why in skipped.items():
        print(f"x{factor}: not measured: {why}")
    print("s = the manifest's stage seconds; GiB = peak of the build's processes' summed PSS while the stage ran;"
          " growth = the stage's time growth from the previous factor over the MIMIC-IV rows' growth (1: linear; "
          f"! grows faster than its rows). Goal at x100: <= {GOAL_SECONDS // 60} min and <= {GOAL_GIB} GiB in all.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--factors", default="1,10,100", help="comma-separated replication factors")
    parser.add_argument("--work-dir", type=Path, default=REPO / "data" / "bench",
                        help="where each factor's files and build go (default data/bench/, gitignored)")
    parser.add_argument("--keep", action="store_true", help="keep each factor's files and build (default: delete)")
    parser.add_argument("--mimic-iv-dir", type=Path, default=os.environ.get("EHRBENCH_MIMIC_IV_DIR")
                        or SHARED / "mimic-iv-demo-2.2")
    parser.add_argument("--eicu-dir", type=Path, default=os.environ.get("EHRBENCH_EICU_DIR")
                        or SHARED / "eicu-demo-2.0.1")
    options = parser.parse_args()
    factors = [int(f) for f in options.factors.split(",")]
    if any(f < 1 for f in factors):
        parser.error("factors must be >= 1")
    for flag, folder in (("--mimic-iv-dir", options.mimic_iv_dir), ("--eicu-dir", options.eicu_dir)):
        if not Path(folder).is_dir():
            parser.error(f"{flag}: no folder at {folder}")
    options.work_dir = options.work_dir.resolve() / "scaleup-build"

    load_before = os.getloadavg()[0]  # another process on the 2 cores skews every figure: say so
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
    report(rows, skipped)
    print(json.dumps({"skipped": skipped, "factors": rows}))


if __name__ == "__main__":
    main()
