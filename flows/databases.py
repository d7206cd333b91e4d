"""Stage 3 — databases: build the benchmark database profiles with dbt (time-shifted, normalised,
EHRSQL-compatible) and export each as stand-alone DuckDB and SQLite files into the build folder:
`db/<profile>/<database>.duckdb|.sqlite`."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger
from prefect.artifacts import create_table_artifact

from ehrbench.export import export_schema
from ehrbench.profiles import BENCHMARK_DATABASES
from ehrbench.settings import DataLayout
from ehrbench.transform import DbtRun, run_dbt


@flow(name="databases")
def build_databases(layout: DataLayout, build_dir: Path, profile_vars: dict) -> tuple[DbtRun, dict]:
    """Returns the dbt run and, per `<profile>/<database>`, its files and table row counts."""
    logger = get_run_logger()
    profiles = sorted({db.profile for db in BENCHMARK_DATABASES})
    run = run_dbt(["build", "--select", *profiles], warehouse=layout.warehouse, work_dir=layout.dbt_work,
                  vars=profile_vars, on_log=logger.info)

    exported: dict[str, dict] = {}
    for db in BENCHMARK_DATABASES:
        duckdb_file, sqlite_file = db.files(build_dir)
        counts = export_schema(layout.warehouse, db.schema, duckdb_file, sqlite_file)
        exported[db.key] = {"schema": db.schema, "duckdb": str(duckdb_file.relative_to(build_dir)),
                            "sqlite": str(sqlite_file.relative_to(build_dir)), "row_counts": counts}
        logger.info("%s: %d tables, %d rows → %s", db.key, len(counts), sum(counts.values()), duckdb_file.parent)

    create_table_artifact(
        key="databases",
        table=[{"database": key, "table": table, "rows": rows, "files": f"{info['duckdb']}, {info['sqlite']}"}
               for key, info in exported.items() for table, rows in info["row_counts"].items()],
        description="Benchmark databases exported into the build (agent-facing files)")
    return run, exported
