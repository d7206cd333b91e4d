"""[7/10] dq: data-quality audit tasks (docs/benchmarks.md#data-quality-error-injection): seeded errors injected into an
extract of the build's MIMIC-IV patients, with hidden cluster gold.

    the dq models (built by dbt in the databases stage; models/dq/: a seeded patient sample under neutral table and
      column names, times shifted like the databases)
      → per task of the recipes (src/ehrbench/dq/recipes/default.yaml, or the build's own file):
        inject its errors into a copy → write dq/<task>/ and dq/<task>_clues/ (agent-facing instruction.md and
        data/, hidden gold/) → read back: every label verified, no source name in any agent-visible file (else the
        build fails)
      → calibrate (ehrbench.dq.calibrate): the oracle (gold rows) must pass every task; the rule-based auditor's
        scores are reported
      → artifact `dq-tasks`: errors, labelled rows and calibration per task.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE

from ehrbench.dq.calibrate import calibrate_task, check_oracle_passes, manifest_entry
from ehrbench.dq.csv_files import ExtractFiles
from ehrbench.dq.extract import Tables, read_extract
from ehrbench.dq.inject import inject_task
from ehrbench.dq.recipes import TaskRecipe, load_recipes
from ehrbench.dq.tasks import WrittenTask, write_task
from ehrbench.errors import ValidationError
from ehrbench.layout import BuildLayout, DataLayout
from ehrbench.settings import DqSettings
from flows.prefect_api import table_artifact


@flow(name="dq")
def build_audit_tasks(layout: DataLayout, build_dir: Path, seed: int, settings: DqSettings,
                      warehouse: Path | None = None) -> dict:
    """Returns the manifest's `dq` entry: recipes, extract size, tasks, calibration scores. The warehouse (default
    `layout.warehouse`; a build passes its copy of the side stages' inputs) holds the dq models, built with
    `ProfileVars.with_dq(seed, <the recipes' extract patients>)`."""
    logger = get_run_logger()
    recipes = load_recipes(settings.recipes)
    extract = read_extract(warehouse or layout.warehouse)
    dq_dir = BuildLayout(build_dir).dq
    files = ExtractFiles(extract)  # the extract's rows formatted once, for every task
    written = [entry for recipe in recipes.tasks for entry in make_task(extract, recipe, seed, dq_dir, files)]
    calibration = [calibrate([e for e in written if e.recipe_id == recipe.id]) for recipe in recipes.tasks]
    publish_artifacts(written, calibration)
    check_oracle_passes(calibration)
    logger.info("dq: %d tasks, %d clusters", len(written), sum(e.clusters for e in written))
    return manifest_entry(recipes, settings.recipes, extract, written, calibration, build_dir)


@task(name="make-audit-task", task_run_name="make-audit-task/{recipe.id}",
      cache_policy=NONE)  # the extract is a large input; nothing here is worth caching
def make_task(extract: Tables, recipe: TaskRecipe, seed: int, dq_dir: Path, files: ExtractFiles) -> list[WrittenTask]:
    injected = inject_task(extract, recipe, seed)
    if not injected.labels:
        raise ValidationError(f"audit task {recipe.id}: no error could be injected (no row qualified for "
                              f"{', '.join(injected.shortfalls)}); widen its tables or patients in scope")
    if injected.shortfalls:
        get_run_logger().warning("task %s: no row qualified for %s", recipe.id, injected.shortfalls)
    return write_task(injected, dq_dir, seed, files)


@task(name="calibrate-audit-task", task_run_name="calibrate/{variants[0].recipe_id}", cache_policy=NONE)
def calibrate(variants: list[WrittenTask]) -> dict:
    """The oracle's score on every variant folder of a task, and the rule-based auditor's (ehrbench.dq.calibrate)."""
    return calibrate_task(variants)


def publish_artifacts(written: list[WrittenTask], calibration: list[dict]) -> None:
    scores = {row["task"]: row for row in calibration}  # per task; its variants share data and labels
    table_artifact(
        key="dq-tasks",
        table=[{"task": e.task_id, "families": ", ".join(e.families), "errors": e.clusters,
                "labelled rows": e.labelled_rows, "oracle passes": scores[e.recipe_id]["oracle_passed"],
                "rule auditor recall": scores[e.recipe_id]["auditor_recall"],
                "rule auditor precision": scores[e.recipe_id]["auditor_precision"],
                "short of rows": ", ".join(f"{k} {v}" for k, v in e.shortfalls.items())}
               for e in written],
        description="Data-quality audit tasks: injected errors (clusters), the gold's own score and the rule-based "
                    "reference auditor's (range, unit, duplicate, cross-table, temporal and reference checks)")
