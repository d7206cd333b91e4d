"""Stage 5 — fhir: build the FHIR R4 view of the MIMIC-IV profiles' patients with dbt (ids compatible with
MIMIC-IV on FHIR, times shifted like the SQL databases), export it into the build (`fhir/<ResourceType>.ndjson.gz`,
`fhir/resources.duckdb`) and validate the resources with fhir.resources; an invalid resource or a reference to no
resource of the build fails the build. Given the published EHRSQL-2024 questions, ground each in the resources
its gold SQL reads (`hidden/fhir_ground_truth/ehrsql2024_valid.parquet`).
(Not named fhir.py: Prefect puts this folder on sys.path, where that name would hide the fhir.resources package.)"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task

from ehrbench.ehrsql.published import load_questions
from ehrbench.errors import ValidationError
from ehrbench.fhir.export import export_fhir
from ehrbench.fhir.ground_truth import Question, ground_questions, ground_truth_markdown, summarize, write_groundings
from ehrbench.fhir.grounding_check import check_groundings, check_markdown
from ehrbench.profiles import BenchmarkDatabase
from ehrbench.settings import DataLayout
from ehrbench.transform import DbtRun, run_dbt
from flows.prefect_api import log_dbt_run, markdown_artifact, table_artifact

CHECK_LIMIT = 500  # questions of the dual grounding check (a seeded sample beyond that)


@flow(name="fhir")
def build_fhir(layout: DataLayout, build_dir: Path, profile_vars: dict, seed: int, log_dir: Path,
               ehrsql2024_dir: Path | None = None) -> tuple[DbtRun, dict]:
    """Returns the dbt run and the manifest's `fhir` entry (counts, files, validation, ground truth)."""
    logger = get_run_logger()
    run = run_dbt(["build", "--select", "fhir"], warehouse=layout.warehouse, work_dir=layout.dbt_work,
                  vars=profile_vars, log_dir=log_dir)
    log_dbt_run(run, log_dir)
    exported = export_fhir(layout.warehouse, build_dir, seed=seed)
    report = exported.validation
    logger.info("FHIR: %s; validated %d resources%s", exported.counts, report.checked,
                f" of {exported.validated_patients} sampled patients" if exported.validated_patients else "")
    table_artifact(
        key="fhir",
        table=[{"resource type": kind, "resources": n, "file": exported.files[kind]}
               for kind, n in exported.counts.items()],
        description=f"FHIR resources in the build; {report.checked} validated with fhir.resources (R4B), "
                    f"{len(report.failures)} invalid")
    if exported.dangling_references:
        raise ValidationError(f"{exported.dangling_references} FHIR reference(s) name no resource of the build, e.g. "
                              + "; ".join(exported.dangling_examples))
    if not report.ok:
        shown = "; ".join(f"{label}: {message}" for label, message in report.failures[:3])
        raise ValidationError(f"{len(report.failures)} FHIR resource(s) are invalid (fhir.resources R4B): {shown}")
    entry = {"counts": exported.counts, "files": exported.files, "validated": report.checked,
             "validated_patients": exported.validated_patients}
    if ehrsql2024_dir:
        entry["ground_truth"] = {"ehrsql2024_valid": ground_ehrsql2024(build_dir, Path(ehrsql2024_dir),
                                                                       profile_vars["ehrsql2024"]["current_time"],
                                                                       seed)}
    return run, entry


@task(name="ground-ehrsql2024-in-fhir", task_run_name="ground-ehrsql2024-valid-in-fhir")
def ground_ehrsql2024(build_dir: Path, ehrsql2024_dir: Path, current_time: str, seed: int) -> dict:
    """Resource-id ground truth of the published EHRSQL-2024 valid questions, on the build's ehrsql2024 database;
    hidden file plus an artifact with the share of single-patient questions grounded, why others are not, and
    the dual grounding check of a seeded sample of them."""
    published = load_questions(ehrsql2024_dir, "valid")
    questions = [Question(q.question_id, q.sql, q.patient_id is not None) for q in published]
    database = BenchmarkDatabase("ehrsql2024", "mimic_iv")
    groundings = ground_questions(questions, database.files(build_dir)[1],
                                  build_dir / "hidden" / "lineage" / f"{database.key}.parquet",
                                  build_dir / "fhir" / "resources.duckdb", current_time)
    path = build_dir / "hidden" / "fhir_ground_truth" / "ehrsql2024_valid.parquet"
    write_groundings(groundings, path)
    summary = summarize(groundings)
    check = check_groundings(groundings, {q.question_id: q.sql for q in questions}, database.files(build_dir)[1],
                             build_dir / "fhir" / "resources.duckdb", current_time, limit=CHECK_LIMIT, seed=seed)
    markdown_artifact(
        key="fhir-ground-truth", markdown=ground_truth_markdown(summary) + "\n\n" + check_markdown(check),
        description="FHIR resource-id ground truth of the EHRSQL-2024 valid questions, and the dual grounding "
                    "check (answers from the FHIR resources vs the SQL answers)")
    return {"file": str(path.relative_to(build_dir)), **summary, "grounding_check": check.to_dict()}
