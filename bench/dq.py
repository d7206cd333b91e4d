"""Data-quality audit tasks: extract, injection and writing time, and the rule-based auditor's scores, on the
MIMIC-IV demo and its synthetic scale-ups (bench/scaleup.py's replication).

    uv run python bench/dq.py [--factors 1,10] [--work-dir DIR] [--mimic-iv-dir DIR] [--recipes FILE]

Per factor f, on a new warehouse under --work-dir (default data/bench/, gitignored; deleted afterwards): ingest +
replicate + `dbt run` of everything upstream of the audit extract, not timed; then, in a fresh Python process: the
extract (`dbt run --select dq` with 100 * f patients in scope, so the extract grows with the data), reading it, and
per task of the recipes the injection, the writing of both variants (with their verification) and the rule-based
auditor's run and score. Prints one line per factor and task, then a JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from fresh_process import run_fresh
from scaleup import PRELUDE, PREPARE, parse_factor_options

UPSTREAM = """
from ehrbench.transform import run_dbt
run_dbt(["run", "--select", "+dq", "--exclude", "dq"], warehouse=Path(args["warehouse"]),
        work_dir=Path(args["dbt_work"]), vars=args["vars"])
out = {}
"""

MAKE_TASKS = """
import tempfile
from ehrbench.dq.auditor import audit, write_flagged_rows
from ehrbench.dq.csv_files import ExtractFiles
from ehrbench.dq.extract import read_extract
from ehrbench.dq.inject import inject_task
from ehrbench.dq.recipes import load_recipes
from ehrbench.dq.score import score_task
from ehrbench.dq.tasks import write_task
from ehrbench.transform import run_dbt
recipes = load_recipes(Path(args["recipes"]) if args["recipes"] else None)
t = time.perf_counter()
run_dbt(["run", "--select", "dq"], warehouse=Path(args["warehouse"]), work_dir=Path(args["dbt_work"]),
        vars=args["vars"])
out = {"extract_s": time.perf_counter() - t}
t = time.perf_counter()
extract = read_extract(Path(args["warehouse"]))
out["read_s"] = time.perf_counter() - t
out["extract_rows"] = sum(len(frame) for frame in extract.values())
out["tasks"] = []
files = ExtractFiles(extract)  # as the dq flow does: the extract's rows formatted once, for every task
for recipe in recipes.tasks:
    t = time.perf_counter()
    injected = inject_task(extract, recipe, 0)
    inject_s = time.perf_counter() - t
    t = time.perf_counter()
    written = write_task(injected, Path(args["build_dir"]) / "dq", 0, files)
    write_s = time.perf_counter() - t
    t = time.perf_counter()
    findings = audit(written[0].folder / "data")
    audit_s = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as scratch:
        write_flagged_rows(findings, Path(scratch) / "flagged.csv")
        score = score_task(written[0].folder, Path(scratch) / "flagged.csv")
    out["tasks"].append({"task": recipe.id, "clusters": injected.clusters, "shortfalls": injected.shortfalls,
                         "inject_s": inject_s, "write_s": write_s, "audit_s": audit_s,
                         "auditor_recall": score.recall, "auditor_precision": score.precision,
                         "auditor_flagged": score.flagged_rows, "recall_by_family": score.recall_by_family})
"""


def run_factor(factor: int, options, work: Path) -> dict:
    from ehrbench.profiles import profile_vars

    dbt_vars = profile_vars(0)
    dbt_vars["ehrsql2024"]["num_patients"] = 100 * factor
    dbt_vars["dq"] = {"seed": 0, "patients": 100 * factor}
    folder = work / f"dq_x{factor}"
    shutil.rmtree(folder, ignore_errors=True)
    args = {"warehouse": str(folder / "warehouse.duckdb"), "dbt_work": str(work / "dbt"), "vars": dbt_vars,
            "factor": factor, "mimic_iv_dir": str(options.mimic_iv_dir), "eicu_dir": None,
            "bench_dir": str(Path(__file__).parent), "build_dir": str(folder / "build"),
            "recipes": str(options.recipes) if options.recipes else None}
    folder.mkdir(parents=True)
    try:
        run_fresh(PRELUDE + PREPARE, args, "prepare")
        run_fresh(PRELUDE + UPSTREAM, args, "upstream")
        made = run_fresh(PRELUDE + MAKE_TASKS, args, "tasks")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    tasks = made["tasks"]
    return {"factor": factor, "patients": 100 * factor, "extract_rows": made["extract_rows"],
            "extract_s": round(made["extract_s"], 2), "read_s": round(made["read_s"], 2),
            "inject_s": round(sum(t["inject_s"] for t in tasks), 2),
            "write_s": round(sum(t["write_s"] for t in tasks), 2),
            "audit_s": round(sum(t["audit_s"] for t in tasks), 2), "peak_rss_mib": round(made["peak_rss_mib"]),
            "tasks": [{k: round(v, 3) if isinstance(v, float) else v for k, v in t.items()} for t in tasks]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipes", type=Path, default=None, help="recipe file (default: the suite's own)")
    options = parse_factor_options(parser)
    results = []
    for factor in options.factors:
        result = run_factor(factor, options, options.work_dir)
        results.append(result)
        print(f"x{factor}: {result['patients']} patients, {result['extract_rows']:,} extract rows; extract "
              f"{result['extract_s']} s (dbt), read {result['read_s']} s, inject {result['inject_s']} s, write + "
              f"verify {result['write_s']} s, rule auditor {result['audit_s']} s; peak RSS {result['peak_rss_mib']} "
              "MiB", flush=True)
        for task in result["tasks"]:
            print(f"  {task['task']}: {task['clusters']} errors; inject {task['inject_s']} s, write "
                  f"{task['write_s']} s; rule auditor recall {task['auditor_recall']:.2f}, precision "
                  f"{task['auditor_precision']:.4f} ({task['auditor_flagged']} rows flagged)", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
