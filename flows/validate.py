"""Stage 3 — validate: Great Expectations suites from expectations/ on the staged tables.
A failing expectation fails the build."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from ehrbench.errors import ValidationError
from ehrbench.settings import DataLayout
from ehrbench.validation import SuiteResult, load_suite, validate_suite

EXPECTATIONS_DIR = Path(__file__).resolve().parents[1] / "expectations"
STAGING_SUITES = ("staging_mimic_iv", "staging_eicu")


@flow(name="validate")
def validate(layout: DataLayout, absent_sources: list[str]) -> dict[str, SuiteResult]:
    """`absent_sources`: raw tables ("eicu.vitalperiodic") that were absent, so may be empty."""
    logger = get_run_logger()
    results: dict[str, SuiteResult] = {}
    for name in STAGING_SUITES:
        suite = load_suite(EXPECTATIONS_DIR / f"{name}.json")
        dataset = suite["schema"].removeprefix("staging_")
        absent = [s.split(".", 1)[1] for s in absent_sources if s.startswith(f"{dataset}.")]
        result = validate_suite(suite, layout.warehouse, absent_sources=absent)
        results[name] = result
        logger.info("%s: %d expectations, %d failed, %d skipped", name, result.evaluated, len(result.failed),
                    len(result.skipped))

    create_table_artifact(
        key="validation-results",
        table=[{"suite": name, "table": o.table, "expectation": o.expectation, "column": o.column or "",
                "success": o.success, "observed": o.observed or "", "unexpected": o.unexpected_count,
                "error": o.error or ""}
               for name, result in results.items() for o in result.outcomes],
        description="Great Expectations outcomes per staged table")
    create_markdown_artifact(
        key="validation-summary",
        markdown="\n".join(["# Validation", "| suite | evaluated | failed | skipped |", "|---|---|---|---|",
                            *[f"| {n} | {r.evaluated} | {len(r.failed)} | {len(r.skipped)} |"
                              for n, r in results.items()]]),
        description="Great Expectations summary")

    failed = [(name, o) for name, r in results.items() for o in r.failed]
    if failed:
        detail = "; ".join(f"{name}: {o.table}.{o.column or ''} {o.expectation} (observed {o.observed}, "
                           f"unexpected {o.unexpected_count}{', ' + o.error if o.error else ''})"
                           for name, o in failed[:5])
        raise ValidationError(f"{len(failed)} expectation(s) failed: {detail}")
    return results
