"""[4/10] databases: build the benchmark database profiles with dbt (time-shifted, normalised, EHRSQL-compatible,
renamed) and export each as stand-alone DuckDB and SQLite files into the build folder.

    dbt build of the models the side stages read (the audit extract, the notes, the MEDS events; ehrbench.side_stages)
      → copied into a file of their own (DataLayout.side_stage_inputs), which the dq, noteqa and meds stages read in
        worker processes from here on, while:
    dbt build of every profile (renamed_random's schemas dropped first: their names change with the seed) and every
      other model the later stages read (`downstream`: the FHIR views; mimic_iv_on_fhir's into a file of its own,
      deleted first) — the warehouse's last write, so that the fhir stage, started here, and questions read it only
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
from ehrbench.fhir.export import remove_view_databases
from ehrbench.layout import BuildLayout, DataLayout
from ehrbench.profiles import BENCHMARK_DATABASES, ProfileVars, schema_renames
from ehrbench.settings import NotesSource
from ehrbench.side_stages import profiles_command, side_models_command, side_stage_inputs
from ehrbench.transform import DbtRun, run_dbt
from ehrbench.warehouse import copy_relations, drop_schemas
from flows.prefect_api import log_dbt_run, table_artifact


@flow(name="side-stage-inputs")
def build_side_stage_inputs(layout: DataLayout, profile_vars: ProfileVars, log_dir: Path,
                            notes_source: NotesSource = "synthetic") -> tuple[DbtRun, Path]:
    """Returns the dbt run of the side stages' models and the file they read them from."""
    run = run_dbt(side_models_command(notes_source), warehouse=layout.warehouse, work_dir=layout.dbt_work,
                  vars=profile_vars.to_dbt_vars(), log_dir=log_dir)
    log_dbt_run(run, log_dir)
    copied = copy_relations(layout.warehouse, layout.side_stage_inputs, side_stage_inputs(notes_source))
    get_run_logger().info("side stages' inputs: %d tables, %d rows → %s", len(copied), sum(copied.values()),
                          layout.side_stage_inputs)
    return run, layout.side_stage_inputs


@flow(name="profiles")
def build_profiles(layout: DataLayout, profile_vars: ProfileVars, log_dir: Path, downstream: Sequence[str] = (),
                   notes_source: NotesSource = "synthetic") -> DbtRun:
    """The dbt run of every profile and the `downstream` selectors (each selects models that depend on the profiles
    or staging); the side stages' models (of `notes_source`) are not in it: `build_side_stage_inputs` built them."""
    drop_schemas(layout.warehouse, tuple(db.schema for db in BENCHMARK_DATABASES if db.profile == "renamed_random"))
    remove_view_databases(layout.warehouse)  # built anew into files of their own, which fhir copies whole
    run = run_dbt(profiles_command(downstream, notes_source), warehouse=layout.warehouse,
                  work_dir=layout.dbt_work, vars=profile_vars.to_dbt_vars(), log_dir=log_dir)
    log_dbt_run(run, log_dir)
    return run


@flow(name="databases")
def export_databases(layout: DataLayout, build_dir: Path, seed: int) -> dict:
    """Per `<profile>/<database>`, its files, table row counts and hidden files, exported from the warehouse."""
    logger = get_run_logger()
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
    return exported
