"""[4/10] databases: build the benchmark database profiles with dbt (time-shifted, normalised, EHRSQL-compatible,
renamed) and export each as stand-alone DuckDB and SQLite files into the build folder.

    dbt build of every profile (renamed_random's schemas dropped first: their names change with the seed), and in
      the same invocation every model the later stages read (`downstream`: FHIR resources, the audit extract, notes,
      MEDS events) — the warehouse's last write, so that the later stages can run side by side, reading it only
      → per benchmark database (ehrbench.export.export_benchmark_database):
        `db/<profile>/<database>.duckdb|.sqlite` (agent-facing), and what agents must not see under `hidden/`:
        the lineage of every row (`hidden/lineage/<profile>/<database>.parquet`) and the schema renames
        (`hidden/rename_maps/<profile>/<database>.json`, from the compatibility schema to the profile's names)
      → artifact `databases`: tables and rows per database.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from prefect import flow, get_run_logger

from ehrbench.export import export_benchmark_database
from ehrbench.layout import BuildLayout, DataLayout
from ehrbench.profiles import BENCHMARK_DATABASES, PROFILE_SELECTION, ProfileVars, schema_renames
from ehrbench.transform import DbtRun, run_dbt
from ehrbench.warehouse import drop_schemas
from flows.prefect_api import log_dbt_run, table_artifact


@flow(name="databases")
def build_databases(layout: DataLayout, build_dir: Path, profile_vars: ProfileVars, seed: int,
                    log_dir: Path, downstream: Sequence[str] = ()) -> tuple[DbtRun, dict]:
    """Returns the dbt run and, per `<profile>/<database>`, its files, table row counts and hidden files.
    `downstream`: dbt selectors built in the same run (each selects models that depend on the profiles or staging)."""
    logger = get_run_logger()
    drop_schemas(layout.warehouse, tuple(db.schema for db in BENCHMARK_DATABASES if db.profile == "renamed_random"))
    run = run_dbt(["build", "--select", *PROFILE_SELECTION, *downstream], warehouse=layout.warehouse,
                  work_dir=layout.dbt_work, vars=profile_vars.to_dbt_vars(), log_dir=log_dir)
    log_dbt_run(run, log_dir)
    build, renames = BuildLayout(build_dir), schema_renames(seed)

    exported: dict[str, dict] = {}
    for db in BENCHMARK_DATABASES:
        exported[db.key] = info = export_benchmark_database(layout.warehouse, build, db, renames.get(db.key))
        counts = info["row_counts"]
        logger.info("%s: %d tables, %d rows → %s", db.key, len(counts), sum(counts.values()),
                    build.database_files(db.profile, db.database)[0].parent)

    table_artifact(
        key="databases",
        table=[{"database": key, "table": table, "rows": rows, "files": f"{info['duckdb']}, {info['sqlite']}"}
               for key, info in exported.items() for table, rows in info["row_counts"].items()],
        description="Benchmark databases exported into the build (agent-facing files; lineage and rename maps "
                    "are in the build's hidden/ folder)")
    return run, exported
