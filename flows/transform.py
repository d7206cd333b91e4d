"""[2/10] transform: `dbt build` of the staging models of every ingested release (typed, cleaned sources with YAML
tests); artifact `transform-dbt`."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from ehrbench.layout import DataLayout
from ehrbench.profiles import ProfileVars
from ehrbench.transform import DbtRun, run_dbt, staging_selection
from flows.prefect_api import log_dbt_run, markdown_artifact


@flow(name="transform")
def transform(layout: DataLayout, profile_vars: ProfileVars, log_dir: Path, datasets: list[str]) -> list[DbtRun]:
    """dbt build of the staging models of `datasets` (models/staging/<dataset>/: MIMIC-IV-Note's only when it was
    ingested). Staging reads no vars; it gets the build's so that the later stages' dbt commands reuse this one's
    parse."""
    run = run_dbt(["build", "--select", *staging_selection(datasets)], warehouse=layout.warehouse,
                  work_dir=layout.dbt_work,
                  vars=profile_vars.to_dbt_vars(), log_dir=log_dir)
    log_dbt_run(run, log_dir)
    warnings = [node for node in run.nodes if node.status == "warn"]
    markdown_artifact(
        key="transform-dbt",
        markdown="\n".join([
            "# dbt build (staging)",
            "| status | nodes |", "|---|---|",
            *[f"| {status} | {count} |" for status, count in run.summary.items()],
            "", "Warnings:" if warnings else "No warnings.",
            *[f"- `{node.unique_id}`: {node.message}" for node in warnings],
        ]),
        description="dbt build of the staging layer")
    return [run]
