"""The MEDS export's throughput: events made per second by dbt (models/meds/) and written and checked per second
(ehrbench.meds.export, both timelines), on the MIMIC-IV demo and its synthetic scale-ups (bench/scaleup.py).

    uv run python bench/meds.py [--factors 1,10] [--work-dir DIR] [--mimic-iv-dir DIR]

Per factor f, on a new warehouse under --work-dir (default data/bench/, gitignored; deleted afterwards): ingest +
replicate + `dbt run` staging and the ehrsql2024 profile (cohort 100 * f patients), not timed; then, each in a fresh
Python process, `dbt build --select meds.mimic_iv` (the models and their tests) and the export of both timelines into
a build folder. Prints one line per factor, then a JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from fresh_process import run_fresh
from scaleup import PRELUDE, PREPARE, parse_factor_options

PROFILE = """
from ehrbench.transform import run_dbt
run_dbt(["run", "--select", "staging.mimic_iv", "ehrsql2024"], warehouse=Path(args["warehouse"]),
        work_dir=Path(args["dbt_work"]), vars=args["vars"])
out = {}
"""

GENERATE = """
from ehrbench.transform import run_dbt
import dbt.cli.main  # noqa: F401  (its import counts as start-up, not as dbt's run)
t = time.perf_counter()
run = run_dbt(["build", "--select", "meds.mimic_iv"], warehouse=Path(args["warehouse"]),
              work_dir=Path(args["dbt_work"]), vars=args["vars"])
out = {"invoke_s": time.perf_counter() - t, "node_s": run.span_seconds}  # two nodes at a time on small data
"""

EXPORT = """
from datetime import UTC, datetime
from ehrbench.meds.export import export_meds
out = {}
for timeline in ("raw", "shifted"):  # MIMIC-IV's, which the scale-up replicates
    t = time.perf_counter()
    dataset = export_meds(Path(args["warehouse"]), Path(args["build_dir"]), timeline, dataset_name="bench",
                          dataset_version="2.2", license="ODbL-1.0", created_at=datetime.now(UTC))
    out[timeline] = {"seconds": time.perf_counter() - t, "events": dataset.events, "subjects": dataset.subjects,
                     "codes": dataset.codes, "shards": dataset.shards}
"""


def run_factor(factor: int, options, work: Path) -> dict:
    from ehrbench.profiles import profile_vars

    dbt_vars = profile_vars(0)
    dbt_vars["ehrsql2024"]["num_patients"] = 100 * factor
    folder = work / f"meds_x{factor}"
    shutil.rmtree(folder, ignore_errors=True)
    args = {"warehouse": str(folder / "warehouse.duckdb"), "dbt_work": str(work / "dbt"), "vars": dbt_vars,
            "factor": factor, "mimic_iv_dir": str(options.mimic_iv_dir), "eicu_dir": None,
            "bench_dir": str(Path(__file__).parent), "build_dir": str(folder / "build")}
    folder.mkdir(parents=True)
    try:
        run_fresh(PRELUDE + PREPARE, args, "prepare")
        run_fresh(PRELUDE + PROFILE, args, "profile")
        generated = run_fresh(PRELUDE + GENERATE, args, "dbt build meds")
        exported = run_fresh(PRELUDE + EXPORT, args, "export")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    events = exported["raw"]["events"] + exported["shifted"]["events"]
    return {"factor": factor, "raw_events": exported["raw"]["events"], "shifted_events": exported["shifted"]["events"],
            "subjects": exported["raw"]["subjects"], "codes": exported["raw"]["codes"],
            "dbt_wall_s": round(generated["wall_s"], 2), "dbt_node_s": round(generated["node_s"], 2),
            "export_s": round(exported["raw"]["seconds"] + exported["shifted"]["seconds"], 2),
            "export_peak_rss_mib": round(exported["peak_rss_mib"]),
            "events_per_s_dbt_nodes": round(exported["raw"]["events"] / generated["node_s"]),
            "events_per_s_export": round(events / (exported["raw"]["seconds"] + exported["shifted"]["seconds"]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options = parse_factor_options(parser)
    results = []
    for factor in options.factors:
        result = run_factor(factor, options, options.work_dir)
        results.append(result)
        print(f"x{factor}: {result['raw_events']:,} raw + {result['shifted_events']:,} shifted events of "
              f"{result['subjects']:,} subjects; dbt {result['dbt_wall_s']} s wall ({result['dbt_node_s']} s in "
              f"nodes, {result['events_per_s_dbt_nodes']:,} raw events/s); export and schema checks "
              f"{result['export_s']} s ({result['events_per_s_export']:,} events/s, peak "
              f"{result['export_peak_rss_mib']} MiB)", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
