"""[5/8] fhir: the FHIR R4 view of the MIMIC-IV profiles' patients (ids compatible with MIMIC-IV on FHIR, times
shifted like the SQL databases).

    dbt build of the fhir models
      → export into the build (`fhir/<ResourceType>.ndjson.gz`, `fhir/resources.duckdb`; agent-facing) and validate
        the resources with fhir.resources: an invalid resource or a reference to no resource of the build fails the
        build (artifact `fhir`)
      → given the published EHRSQL-2024 questions: ground each valid question in the resources its gold SQL reads
        (`hidden/fhir_ground_truth/ehrsql2024_valid.parquet`) and check a sample both ways (artifact
        `fhir-ground-truth`).

(Not named fhir.py: Prefect puts this folder on sys.path, where that name would hide the fhir.resources package.)"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task

from ehrbench.errors import ValidationError
from ehrbench.fhir.build_grounding import EHRSQL2024_DATABASE, ground_on_build, published_ehrsql2024_questions
from ehrbench.fhir.export import export_fhir
from ehrbench.fhir.ground_truth import ground_truth_markdown, write_groundings
from ehrbench.fhir.grounding_check import check_markdown
from ehrbench.layout import BuildLayout, DataLayout
from ehrbench.profiles import ProfileVars
from ehrbench.transform import DbtRun, run_dbt
from flows.prefect_api import log_dbt_run, markdown_artifact, table_artifact


@flow(name="fhir")
def build_fhir(layout: DataLayout, build_dir: Path, profile_vars: ProfileVars, seed: int, log_dir: Path,
               ehrsql2024_dir: Path | None = None) -> tuple[DbtRun, dict]:
    """Returns the dbt run and the manifest's `fhir` entry (counts, files, validation, ground truth)."""
    logger = get_run_logger()
    run = run_dbt(["build", "--select", "fhir"], warehouse=layout.warehouse, work_dir=layout.dbt_work,
                  vars=profile_vars.to_dbt_vars(), log_dir=log_dir)
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
        entry["ground_truth"] = {"ehrsql2024_valid": ground_ehrsql2024(
            build_dir, Path(ehrsql2024_dir), profile_vars.ehrsql2024.current_time, seed)}
    return run, entry


@task(name="ground-ehrsql2024-in-fhir", task_run_name="ground-ehrsql2024-valid-in-fhir")
def ground_ehrsql2024(build_dir: Path, ehrsql2024_dir: Path, current_time: str, seed: int) -> dict:
    """Resource-id ground truth of the published EHRSQL-2024 valid questions, on the build's ehrsql2024 database;
    hidden file plus an artifact with the share of single-patient questions grounded, why others are not, and
    the dual grounding check of a seeded sample of them."""
    build = BuildLayout(build_dir)
    grounding = ground_on_build(published_ehrsql2024_questions(ehrsql2024_dir), build, EHRSQL2024_DATABASE,
                                current_time, seed)
    path = build.fhir_ground_truth("ehrsql2024_valid")
    write_groundings(grounding.groundings, path)
    markdown_artifact(
        key="fhir-ground-truth",
        markdown=ground_truth_markdown(grounding.summary) + "\n\n" + check_markdown(grounding.check),
        description="FHIR resource-id ground truth of the EHRSQL-2024 valid questions, and the dual grounding "
                    "check (answers from the FHIR resources vs the SQL answers)")
    return {"file": build.relative(path), **grounding.to_dict()}
