"""[5/10] fhir: the FHIR R4 views, with MIMIC-IV on FHIR's ids: the EHRSQL-aligned one (the MIMIC-IV profiles'
patients, times shifted like the SQL databases) and `mimic_iv_on_fhir` (MIMIC-IV on FHIR's resources of every raw row,
raw times: what FHIR-AgentBench was built on).

    the fhir models of both views (built by dbt in the databases stage)
      → export each into the build (`fhir/[mimic_iv_on_fhir/]<ResourceType>.ndjson.gz`, `…/resources.duckdb`;
        agent-facing) and validate the resources with fhir.resources: an invalid resource or a reference to no
        resource of its view fails the build (artifact `fhir`)
      → given the published EHRSQL-2024 questions: ground each valid question in the resources its gold SQL reads
        (`hidden/fhir_ground_truth/ehrsql2024_valid.parquet`) and check a sample both ways (artifact
        `fhir-ground-truth`).

(Not named fhir.py: Prefect puts this folder on sys.path, where that name would hide the fhir.resources package.)"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task

from ehrbench.errors import ValidationError
from ehrbench.fhir.build_grounding import EHRSQL2024_DATABASE, ground_on_build, published_ehrsql2024_questions
from ehrbench.fhir.export import EHRSQL_ALIGNED_VIEW, MIMIC_IV_ON_FHIR_VIEW, FhirExport, FhirView, export_fhir
from ehrbench.fhir.ground_truth import ground_truth_markdown, write_groundings
from ehrbench.fhir.grounding_check import check_markdown
from ehrbench.layout import BuildLayout, DataLayout
from ehrbench.profiles import ProfileVars
from flows.prefect_api import markdown_artifact, table_artifact


@flow(name="fhir")
def build_fhir(layout: DataLayout, build_dir: Path, profile_vars: ProfileVars, seed: int,
               ehrsql2024_dir: Path | None = None, mimic_iv_on_fhir: bool = True) -> dict:
    """Returns the manifest's `fhir` entry (counts, files, validation, ground truth). The warehouse holds the models
    of `fhir_selection(mimic_iv_on_fhir)`."""
    views = (EHRSQL_ALIGNED_VIEW, MIMIC_IV_ON_FHIR_VIEW) if mimic_iv_on_fhir else (EHRSQL_ALIGNED_VIEW,)
    exports = {view: export_view(layout, build_dir, view, seed) for view in views}
    table_artifact(
        key="fhir",
        table=[{"view": view.folder or "ehrsql2024", "resource type": kind, "resources": n, "file": export.files[kind]}
               for view, export in exports.items() for kind, n in export.counts.items()],
        description=f"FHIR resources in the build; {sum(e.validation.checked for e in exports.values())} "
                    "validated with fhir.resources (R4B), none invalid")
    entry = {**_view_entry(exports[EHRSQL_ALIGNED_VIEW]),
             "views": {view.folder: _view_entry(export) for view, export in exports.items() if view.folder}}
    if ehrsql2024_dir:
        entry["ground_truth"] = {"ehrsql2024_valid": ground_ehrsql2024(
            build_dir, Path(ehrsql2024_dir), profile_vars.ehrsql2024.current_time, seed)}
    return entry


def export_view(layout: DataLayout, build_dir: Path, view: FhirView, seed: int) -> FhirExport:
    """One view's files and their validation; a view with an invalid resource or a dangling reference fails."""
    exported = export_fhir(layout.warehouse, build_dir, view=view, seed=seed)
    report, name = exported.validation, view.folder or "EHRSQL-aligned"
    get_run_logger().info("FHIR (%s view): %s; validated %d resources%s", name, exported.counts, report.checked,
                          f" of {exported.validated_patients} sampled patients" if exported.validated_patients else "")
    if exported.dangling_references:
        raise ValidationError(f"{exported.dangling_references} FHIR reference(s) of the {name} view name no resource "
                              "of it, e.g. " + "; ".join(exported.dangling_examples))
    if not report.ok:
        shown = "; ".join(f"{label}: {message}" for label, message in report.failures[:3])
        raise ValidationError(f"{len(report.failures)} FHIR resource(s) of the {name} view are invalid "
                              f"(fhir.resources R4B): {shown}")
    return exported


def _view_entry(exported: FhirExport) -> dict:
    return {"counts": exported.counts, "files": exported.files, "validated": exported.validation.checked,
            "validated_patients": exported.validated_patients}


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
