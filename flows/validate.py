"""Great Expectations suites from expectations/.

[3/10] validate: the staged tables; a failing expectation fails the build (artifacts `validation-results`,
`validation-summary`).
Within [6/10] questions — validate-questions: the generated questions; failing questions are quarantined
(`quarantine/questions.parquet`), the Data Docs written into the build (`reports/gx/`), and the build fails only when
the quarantined share passes its threshold (artifacts `questions-validation`, `questions-data-docs`)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ehrbench.errors import ValidationError
from ehrbench.layout import BuildLayout, DataLayout
from ehrbench.publish import build_id_of
from ehrbench.stack.static_files import data_docs_link
from ehrbench.validation import SuiteResult, load_suite, validate_suite
from ehrbench.validation.questions import QuestionValidation, validate_questions, write_quarantine
from flows.prefect_api import link_artifact, markdown_artifact, table_artifact

EXPECTATIONS_DIR = Path(__file__).resolve().parents[1] / "expectations"
STAGING_SUITES = ("staging_mimic_iv", "staging_eicu")
QUESTION_SUITE = EXPECTATIONS_DIR / "questions.json"


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

    table_artifact(
        key="validation-results",
        table=[{"suite": name, "table": o.table, "expectation": o.expectation, "column": o.column or "",
                "success": o.success, "observed": o.observed or "", "unexpected": o.unexpected_count,
                "error": o.error or ""}
               for name, result in results.items() for o in result.outcomes],
        description="Great Expectations outcomes per staged table")
    markdown_artifact(
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


# a task, not a flow: thousands of records are no flow parameters
@task(name="validate-questions", task_run_name="validate-questions", cache_policy=NO_CACHE)
def validate_question_set(records: list[dict], databases: list[str], build_dir: Path,
                          max_quarantine_share: float) -> QuestionValidation:
    """`records`: GeneratedQuestion.to_dict() rows. Writes the quarantine and the Data Docs into the build."""
    logger, build = get_run_logger(), BuildLayout(build_dir)
    validation = validate_questions(records, QUESTION_SUITE, databases=databases, data_docs_dir=build.gx_docs)
    write_quarantine(records, validation, build.question_quarantine)
    logger.info("questions: %d validated, %d quarantined (%.1f %%)", validation.total, validation.quarantined_count,
                100 * validation.quarantine_share)
    for shortfall in validation.coverage_shortfalls():
        logger.warning("question coverage not met: %s", shortfall)
    for problem in validation.data_docs_offline.problems() if validation.data_docs_offline else []:
        logger.warning("Data Docs: %s", problem)
    markdown_artifact(key="questions-validation", markdown=validation.markdown(),
                      description="Great Expectations on the generated questions")
    if validation.data_docs_index:
        # where they will be once the build is published (the staging folder is renamed then), over HTTP when
        # `make server`'s file server serves them
        link_artifact(key="questions-data-docs", link=data_docs_link(build_dir.parent, build_id_of(build_dir)),
                      link_text="Great Expectations Data Docs of the questions",
                      description="Data Docs in the build folder (reports/gx/)")
    validation.check(max_quarantine_share)
    return validation
