"""[9/10] meds: the build's MIMIC-IV as MEDS datasets (docs/benchmarks.md#meds-export), for event-stream models and the
terminal agents' workspace tasks.

    dbt (models/meds/mimic_iv/: every row as MEDS events coded as the MEDS-for-MIMIC-IV ETL codes them; the raw
      timeline, and the shifted one of the ehrsql2024 and renamed databases; codes with descriptions; seeded splits)
      → per timeline, data shards and metadata checked against the `meds` package's schemas (ehrbench.meds.export)
        and written to meds/<timeline>/
      → artifact `meds`: subjects, events, codes and splits per timeline.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import meds
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ehrbench.layout import DataLayout
from ehrbench.meds.export import TIMELINES, MedsDataset, export_meds
from ehrbench.profiles import ProfileVars
from ehrbench.transform import DbtRun, run_dbt
from flows.prefect_api import log_dbt_run, table_artifact

CONVENTION = "Medical-Event-Data-Standard/MIMIC_IV_MEDS event_configs.yaml"
LICENSES = {"demo": "ODbL-1.0", "full": "PhysioNet Credentialed Health Data License 1.5.0"}


@flow(name="meds")
def build_meds(layout: DataLayout, build_dir: Path, profile_vars: ProfileVars, log_dir: Path,
               mimic_iv: dict, created_at: datetime) -> tuple[DbtRun, dict]:
    """Returns the dbt run and the manifest's `meds` entry. `mimic_iv`: the ingested release (edition, version)."""
    run = run_dbt(["build", "--select", "meds"], warehouse=layout.warehouse, work_dir=layout.dbt_work,
                  vars=profile_vars.to_dbt_vars(), log_dir=log_dir)
    log_dbt_run(run, log_dir)
    datasets = [write_timeline(layout.warehouse, build_dir, timeline, mimic_iv, created_at) for timeline in TIMELINES]
    table_artifact(key="meds", table=[{"timeline": d.timeline, "subjects": d.subjects, "events": d.events,
                                       "codes": d.codes, "shards": d.shards, "first": d.first_time,
                                       "last": d.last_time, **d.splits} for d in datasets],
                   description="MEDS datasets of the build (meds/<timeline>/), checked against the meds schemas")
    return run, {"meds_version": meds.__version__, "convention": CONVENTION,
                 "timelines": {d.timeline: {k: v for k, v in vars(d).items() if k != "timeline"} for d in datasets}}


@task(name="write-meds", task_run_name="write-meds/{timeline}", cache_policy=NO_CACHE)
def write_timeline(warehouse: Path, build_dir: Path, timeline: str, mimic_iv: dict,
                   created_at: datetime) -> MedsDataset:
    edition = mimic_iv.get("edition", "demo")
    dataset = export_meds(warehouse, build_dir, timeline,
                          dataset_name=f"MIMIC-IV{' demo' if edition == 'demo' else ''} ({timeline} timeline)",
                          dataset_version=str(mimic_iv.get("version", "")),
                          license=LICENSES.get(edition, edition), created_at=created_at)
    get_run_logger().info("meds/%s: %d subjects, %d events, %d codes in %d shard(s)", timeline, dataset.subjects,
                          dataset.events, dataset.codes, dataset.shards)
    return dataset
