"""FHIR views' throughput: resources generated per second (dbt, DuckDB JSON) and validated per second
(fhir.resources R4B), on the MIMIC-IV demo and its synthetic scale-ups (bench/scaleup.py's replication), for the
EHRSQL-aligned view and the mimic_iv_on_fhir view (every raw row).

    uv run python bench/fhir.py [--factors 1,10] [--views ehrsql2024,mimic_iv_on_fhir] [--work-dir DIR]
                                [--mimic-iv-dir DIR] [--validate-sample N]

Per factor f, on a new warehouse under --work-dir (default data/bench/, gitignored; deleted afterwards):
ingest + replicate + `dbt run` staging and the ehrsql2024 profile (cohort 100 * f patients) and the race seed, not
timed; then per view, each in a fresh Python process: `dbt run` of the view's models (generation: wall time of the
whole dbt invocation, and the model nodes' time, from the first one's start to the last one's end: dbt builds two at
a time on small warehouses, ehrbench.transform.dbt_threads), the export into a build folder (ndjson.gz +
DuckDB + reference check, without validation; also given as resources per second of generation and export
together), and validation with fhir.resources (all resources up to --validate-sample, default 100k, else a seeded
sample of that size). Goal (issues 4, 20): >= 200k resources/s
generation. Prints one line per factor and view, then a JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from fresh_process import run_fresh
from machine_speed import before_and_after, machine_speed
from scaleup import PRELUDE, PREPARE, parse_factor_options

GOAL_PER_S = 200_000

PROFILE = """
from ehrbench.transform import run_dbt
run_dbt(["run", "--select", "staging.mimic_iv", "ehrsql2024"], warehouse=Path(args["warehouse"]),
        work_dir=Path(args["dbt_work"]), vars=args["vars"])
run_dbt(["seed", "--select", "mimic_iv_on_fhir_race"], warehouse=Path(args["warehouse"]),
        work_dir=Path(args["dbt_work"]), vars=args["vars"])
out = {}
"""

# view -> (dbt selection, schema of its models, ehrbench.fhir.export view)
VIEWS = {"ehrsql2024": ("fhir.mimic_iv", "fhir__mimic_iv", "EHRSQL_ALIGNED_VIEW"),
         "mimic_iv_on_fhir": ("fhir.mimic_iv_on_fhir", "fhir__mimic_iv_on_fhir", "MIMIC_IV_ON_FHIR_VIEW")}

GENERATE = """
from ehrbench.transform import run_dbt
import dbt.cli.main  # noqa: F401  (its import counts as start-up, not as dbt's run)
import duckdb
t = time.perf_counter()
run = run_dbt(["run", "--select", args["selection"]], warehouse=Path(args["warehouse"]),
              work_dir=Path(args["dbt_work"]), vars=args["vars"])
out = {"invoke_s": time.perf_counter() - t, "node_s": run.span_seconds, "nodes": len(run.nodes)}
from ehrbench.fhir import export
view = getattr(export, args["view"])  # its models: in the warehouse, or in a file of their own beside it
con = duckdb.connect(str(view.models_file(Path(args["warehouse"]))), read_only=True)
con.execute("set enable_progress_bar = false")
tables = [t for (t,) in con.execute(
    "select table_name from information_schema.tables where table_schema = ?", [args["schema"]]).fetchall()]
out["resources"] = sum(con.execute(f"select count(*) from {args['schema']}.{t}").fetchone()[0] for t in tables)
con.close()
"""

EXPORT = """
from ehrbench.fhir import export
t = time.perf_counter()
exported = export.export_fhir(Path(args["warehouse"]), Path(args["build_dir"]), view=getattr(export, args["view"]),
                              validate_limit=0)
out = {"export_s": time.perf_counter() - t, "counts": exported.counts,
       "dangling_references": exported.dangling_references}
"""

VALIDATE = """
import duckdb
from ehrbench.fhir.validation import validate_resources
con = duckdb.connect(args["resources"], read_only=True)
con.execute("set enable_progress_bar = false")  # it would write to stdout, where the figures go
# validation runs at a few thousand resources per second: a seeded sample keeps large factors affordable
texts = [t for (t,) in con.execute("select resource::varchar from resources order by md5(id) limit ?",
                                   [args["validate_sample"]]).fetchall()]
con.close()
t = time.perf_counter()
report = validate_resources(texts, expected=len(texts))  # as the build validates: on every CPU
out = {"validate_s": time.perf_counter() - t, "validated": report.checked, "invalid": len(report.failures)}
"""


def run_factor(factor: int, options, work: Path) -> list[dict]:
    from ehrbench.fhir import export
    from ehrbench.layout import BuildLayout
    from ehrbench.profiles import profile_vars

    dbt_vars = profile_vars(0)
    dbt_vars["ehrsql2024"]["num_patients"] = 100 * factor
    folder = work / f"fhir_x{factor}"
    shutil.rmtree(folder, ignore_errors=True)
    args = {"warehouse": str(folder / "warehouse.duckdb"), "dbt_work": str(work / "dbt"), "vars": dbt_vars,
            "factor": factor, "mimic_iv_dir": str(options.mimic_iv_dir), "eicu_dir": None,
            "bench_dir": str(Path(__file__).parent), "build_dir": str(folder / "build"),
            "validate_sample": options.validate_sample}
    folder.mkdir(parents=True)
    results = []
    try:
        run_fresh(PRELUDE + PREPARE, args, "prepare")
        run_fresh(PRELUDE + PROFILE, args, "profile")
        for view in options.views.split(","):
            selection, schema, view_name = VIEWS[view]
            args.update(selection=selection, schema=schema, view=view_name, resources=str(
                BuildLayout(folder / "build").fhir_view_resources(getattr(export, view_name).folder)))
            generated = run_fresh(PRELUDE + GENERATE, args, f"generate {view}")
            exported = run_fresh(PRELUDE + EXPORT, args, f"export {view}")
            validated = run_fresh(PRELUDE + VALIDATE, args, f"validate {view}")
            n = generated["resources"]
            results.append({
                "factor": factor, "view": view, "resources": n, "counts": exported["counts"],
                "generate_wall_s": round(generated["wall_s"], 2), "generate_invoke_s": round(generated["invoke_s"], 2),
                "generate_node_s": round(generated["node_s"], 2),
                "generated_per_s_wall": round(n / generated["wall_s"]),
                "generated_per_s_nodes": round(n / generated["node_s"]),
                "generate_peak_rss_mib": round(generated["peak_rss_mib"]),
                "export_s": round(exported["export_s"], 2), "export_peak_rss_mib": round(exported["peak_rss_mib"]),
                "generated_and_exported_per_s": round(n / (generated["node_s"] + exported["export_s"])),
                "dangling_references": exported["dangling_references"],
                "validate_s": round(validated["validate_s"], 2), "invalid": validated["invalid"],
                "validated_per_s": round(validated["validated"] / validated["validate_s"]),
                "validate_peak_rss_mib": round(validated["peak_rss_mib"])})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--views", default=",".join(VIEWS), help="FHIR views to measure, comma-separated")
    parser.add_argument("--validate-sample", type=int, default=100_000,
                        help="resources validated (a seeded sample when there are more)")
    options = parse_factor_options(parser)
    speed = {"before": machine_speed()}
    results = []
    for factor in options.factors:
        for result in run_factor(factor, options, options.work_dir):
            results.append(result)
            print(f"x{factor} {result['view']}: {result['resources']:,} resources; generation "
                  f"{result['generate_node_s']} s in dbt nodes ({result['generated_per_s_nodes']:,}/s; goal "
                  f"{GOAL_PER_S:,}/s), {result['generate_wall_s']} s with dbt start-up "
                  f"({result['generated_per_s_wall']:,}/s); export {result['export_s']} s "
                  f"(peak RSS {result['export_peak_rss_mib']} MiB; {result['generated_and_exported_per_s']:,}/s with "
                  f"generation); validation "
                  f"{result['validate_s']} s ({result['validated_per_s']:,}/s, {result['invalid']} invalid); "
                  f"peak RSS {result['generate_peak_rss_mib']} / {result['validate_peak_rss_mib']} MiB", flush=True)
    speed["after"] = machine_speed()
    print(before_and_after(speed))
    print(json.dumps({"machine_speed": speed, "views": results}))


if __name__ == "__main__":
    main()
