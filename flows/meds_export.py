"""[9/10] meds: the build's MIMIC-IV and eICU as MEDS datasets (docs/benchmarks.md#meds-export), for event-stream
models and the terminal agents' workspace tasks.

    the meds models (built by dbt in the databases stage; models/meds/mimic_iv/: every row as MEDS events coded as
      the MEDS-for-MIMIC-IV ETL codes them; the raw timeline, and the shifted one of the ehrsql2024 and renamed
      databases; codes with descriptions; seeded splits. models/meds/eicu/: every eICU row as the eICU-MEDS ETL
      writes it, on its pseudo-timeline)
      → per timeline, data shards and metadata checked against the `meds` package's schemas (ehrbench.meds.export)
        and written to meds/<timeline>/
      → artifact `meds`: subjects, events, codes and splits per timeline.
    the raw release's files (as ingested and verified) of a seeded sample of subjects, a seeded customisation of the
      event configuration → the MEDS conversion tasks with their gold (ehrbench.meds.conversion_tasks) in
      workspace_tasks/meds_conversion/
      → artifact `meds-conversion-tasks`: each task's tables, customisations and expected events.
    meds/raw → new-onset diagnosis targets as ACES task configs, labels by ACES, a seeded subject split, the
      count-features baseline trained and scored → the event-modelling tasks in workspace_tasks/event_modelling/
      (ehrbench.meds.modelling_tasks)
      → artifact `event-modelling-tasks`: each task's cohort and baseline AUROC.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import meds
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ehrbench.layout import BuildLayout, DataLayout
from ehrbench.meds.conversion_tasks import FAMILY, ingested_mimic_iv, plan_conversion_tasks, write_conversion_task
from ehrbench.meds.export import TIMELINES, MedsDataset, export_meds
from ehrbench.meds.modelling_tasks import FAMILY as MODELLING
from ehrbench.meds.modelling_tasks import write_modelling_tasks
from flows.prefect_api import table_artifact

CONVENTION = ("Medical-Event-Data-Standard/MIMIC_IV_MEDS event_configs.yaml; eICU: "
              "Medical-Event-Data-Standard/eICU_MEDS 0.1.0 configs/event_configs.yaml")
SOURCES = {"raw": "mimic_iv", "shifted": "mimic_iv", "eicu": "eicu"}  # the release each MEDS dataset is made from
CONVERSION_TASKS = 4  # MEDS conversion tasks of a build
MODELLING_TASKS = 3  # event-modelling tasks of a build (fewer when fewer targets have enough positive patients)
LICENSES = {"demo": "ODbL-1.0", "full": "PhysioNet Credentialed Health Data License 1.5.0"}


@flow(name="meds")
def build_meds(layout: DataLayout, build_dir: Path, releases: dict[str, dict], created_at: datetime, seed: int,
               conversion_tasks: int = CONVERSION_TASKS, modelling_tasks: int = MODELLING_TASKS,
               warehouse: Path | None = None) -> dict:
    """Returns the manifest's `meds` entry. `releases`: the ingested releases (dataset → edition, version). The
    warehouse (default `layout.warehouse`; a build passes its copy of the side stages' inputs) holds the meds
    models."""
    warehouse = warehouse or layout.warehouse
    datasets = [write_timeline(warehouse, build_dir, timeline, releases[SOURCES[timeline]], created_at)
                for timeline in TIMELINES]
    table_artifact(key="meds", table=[{"timeline": d.timeline, "subjects": d.subjects, "events": d.events,
                                       "codes": d.codes, "shards": d.shards, "first": d.first_time,
                                       "last": d.last_time, **d.splits} for d in datasets],
                   description="MEDS datasets of the build (meds/<timeline>/), checked against the meds schemas")
    tasks = write_conversion_tasks(warehouse, build_dir, seed, conversion_tasks)
    table_artifact(key="meds-conversion-tasks", table=[
        {"task": t["task_id"], "tables": ", ".join(t["tables"]), "customisations": ", ".join(t["customisations"]),
         "subjects": t["subjects"], "events": t["events"]} for t in tasks],
        description="MEDS conversion tasks (workspace_tasks/meds_conversion/): seeded customisations of the "
                    "MEDS-for-MIMIC-IV mapping over raw tables, with the gold events")
    modelling = write_event_modelling_tasks(build_dir, seed, modelling_tasks)
    table_artifact(key="event-modelling-tasks", table=modelling,
                   description="Event-modelling tasks (workspace_tasks/event_modelling/): new-onset diagnosis "
                               "targets as ACES configs, their cohorts and the count-features baseline's test AUROC")
    return {"meds_version": meds.__version__, "convention": CONVENTION,
                 "timelines": {d.timeline: {k: v for k, v in vars(d).items() if k != "timeline"} for d in datasets},
                 "conversion_tasks": tasks, "modelling_tasks": modelling}


@task(name="write-event-modelling-tasks", task_run_name="write-event-modelling-tasks", cache_policy=NO_CACHE)
def write_event_modelling_tasks(build_dir: Path, seed: int, count: int) -> list[dict]:
    """The tasks (labels by ACES, the baseline trained and scored) from the build's raw-timeline MEDS data."""
    layout = BuildLayout(build_dir)
    golds = write_modelling_tasks(layout.meds("raw"), layout.root / "workspace_tasks" / MODELLING, seed, count)
    for gold in golds:
        get_run_logger().info("%s: %d train rows (%d positive), %d test patients (%d positive); baseline AUROC "
                              "%.3f", gold["task_id"], gold["train"]["rows"], gold["train"]["positive_rows"],
                              gold["test"]["subjects"], gold["test"]["positive"], gold["baseline"]["auroc"])
    return [{"task_id": g["task_id"], "target": g["regex"], "train_rows": g["train"]["rows"],
             "train_positive_rows": g["train"]["positive_rows"], "test_subjects": g["test"]["subjects"],
             "test_positive": g["test"]["positive"], "baseline_auroc": g["baseline"]["auroc"]} for g in golds]


@task(name="write-meds-conversion-tasks", task_run_name="write-meds-conversion-tasks", cache_policy=NO_CACHE)
def write_conversion_tasks(warehouse: Path, build_dir: Path, seed: int, count: int) -> list[dict]:
    """The tasks (each with its gold) from the raw MIMIC-IV files the build ingested."""
    sources, subject_ids = ingested_mimic_iv(warehouse)
    entries = []
    for plan in plan_conversion_tasks(subject_ids, count, seed, set(sources)):
        gold = write_conversion_task(plan, sources, BuildLayout(build_dir).workspace_task(FAMILY, plan.task_id).root)
        entries.append({"task_id": plan.task_id, "tables": list(plan.tables),
                        "customisations": list(plan.customisations), "subjects": len(plan.subjects),
                        "events": gold["expected"]["events"], "content_sha256": gold["expected"]["content_sha256"]})
        get_run_logger().info("%s: %s over %s, %d events", plan.task_id, ", ".join(plan.customisations),
                              ", ".join(plan.tables), gold["expected"]["events"])
    return entries


@task(name="write-meds", task_run_name="write-meds/{timeline}", cache_policy=NO_CACHE)
def write_timeline(warehouse: Path, build_dir: Path, timeline: str, release: dict,
                   created_at: datetime) -> MedsDataset:
    edition = release.get("edition", "demo")
    demo = " demo" if edition == "demo" else ""
    name = (f"eICU-CRD{demo} (the eICU-MEDS pseudo-timeline)" if timeline == "eicu"
            else f"MIMIC-IV{demo} ({timeline} timeline)")
    dataset = export_meds(warehouse, build_dir, timeline, dataset_name=name,
                          dataset_version=str(release.get("version", "")),
                          license=LICENSES.get(edition, edition), created_at=created_at)
    get_run_logger().info("meds/%s: %d subjects, %d events, %d codes in %d shard(s)", timeline, dataset.subjects,
                          dataset.events, dataset.codes, dataset.shards)
    return dataset
