"""Stage 2 — transform: `dbt build` of the staging models (typed, cleaned sources with YAML tests)."""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from ehrbench.settings import DataLayout
from ehrbench.transform import DbtRun, run_dbt


@flow(name="transform")
def transform(layout: DataLayout) -> list[DbtRun]:
    logger = get_run_logger()
    run = run_dbt(["build", "--select", "staging"], warehouse=layout.warehouse, work_dir=layout.dbt_work,
                  on_log=logger.info)
    warnings = [node for node in run.nodes if node.status == "warn"]
    create_markdown_artifact(
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
