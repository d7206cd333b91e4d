"""Stage 4 — databases: build the benchmark database profiles with dbt (time-shifted, normalised,
EHRSQL-compatible, renamed) and export each as stand-alone DuckDB and SQLite files into the build folder:
`db/<profile>/<database>.duckdb|.sqlite` (agent-facing). What agents must not see goes to `hidden/`: the
lineage of every row (`hidden/lineage/<profile>/<database>.parquet`) and the schema renames
(`hidden/rename_maps/<profile>/<database>.json`, from the compatibility schema to the profile's names)."""

from __future__ import annotations

import json
from pathlib import Path

from prefect import flow, get_run_logger

from ehrbench.export import export_parquet, export_schema
from ehrbench.profiles import BENCHMARK_DATABASES, LINEAGE_MODELS, PROFILE_SELECTION, schema_renames
from ehrbench.settings import DataLayout
from ehrbench.transform import DbtRun, run_dbt
from ehrbench.warehouse import drop_schemas
from flows.prefect_api import log_dbt_run, table_artifact


@flow(name="databases")
def build_databases(layout: DataLayout, build_dir: Path, profile_vars: dict, seed: int,
                    log_dir: Path) -> tuple[DbtRun, dict]:
    """Returns the dbt run and, per `<profile>/<database>`, its files, table row counts and hidden files."""
    logger = get_run_logger()
    drop_schemas(layout.warehouse, tuple(db.schema for db in BENCHMARK_DATABASES if db.profile == "renamed_random"))
    run = run_dbt(["build", "--select", *PROFILE_SELECTION], warehouse=layout.warehouse,
                  work_dir=layout.dbt_work, vars=profile_vars, log_dir=log_dir)
    log_dbt_run(run, log_dir)
    renames = schema_renames(seed)

    exported: dict[str, dict] = {}
    for db in BENCHMARK_DATABASES:
        duckdb_file, sqlite_file = db.files(build_dir)
        rename = renames.get(db.key)
        tables = [table.target for table in rename.tables] if rename else None
        counts = export_schema(layout.warehouse, db.schema, duckdb_file, sqlite_file, tables=tables)
        info = {"schema": db.schema, "duckdb": str(duckdb_file.relative_to(build_dir)),
                "sqlite": str(sqlite_file.relative_to(build_dir)), "row_counts": counts, "hidden": {}}
        if db.key in LINEAGE_MODELS:
            lineage_file = build_dir / "hidden" / "lineage" / f"{db.key}.parquet"
            export_parquet(layout.warehouse, LINEAGE_MODELS[db.key], lineage_file)
            info["hidden"]["lineage"] = str(lineage_file.relative_to(build_dir))
        if rename:
            map_file = build_dir / "hidden" / "rename_maps" / f"{db.key}.json"
            map_file.parent.mkdir(parents=True, exist_ok=True)
            map_file.write_text(json.dumps(rename.to_dict(), indent=1) + "\n")
            info["hidden"]["rename_map"] = str(map_file.relative_to(build_dir))
        exported[db.key] = info
        logger.info("%s: %d tables, %d rows → %s", db.key, len(counts), sum(counts.values()), duckdb_file.parent)

    table_artifact(
        key="databases",
        table=[{"database": key, "table": table, "rows": rows, "files": f"{info['duckdb']}, {info['sqlite']}"}
               for key, info in exported.items() for table, rows in info["row_counts"].items()],
        description="Benchmark databases exported into the build (agent-facing files; lineage and rename maps "
                    "are in the build's hidden/ folder)")
    return run, exported
