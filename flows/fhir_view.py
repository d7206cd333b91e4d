"""Stage 4 — FHIR: build the FHIR R4 view of the MIMIC-IV profiles' patients with dbt (ids compatible with
MIMIC-IV on FHIR, times shifted like the SQL databases), export it into the build (`fhir/<ResourceType>.ndjson.gz`,
`fhir/resources.duckdb`) and validate the resources with fhir.resources; an invalid resource fails the build.
(Not named fhir.py: Prefect puts this folder on sys.path, where that name would hide the fhir.resources package.)"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger
from prefect.artifacts import create_table_artifact

from ehrbench.errors import ValidationError
from ehrbench.fhir.export import export_fhir
from ehrbench.settings import DataLayout
from ehrbench.transform import DbtRun, run_dbt


@flow(name="fhir")
def build_fhir(layout: DataLayout, build_dir: Path, profile_vars: dict, seed: int) -> tuple[DbtRun, dict]:
    """Returns the dbt run and the manifest's `fhir` entry (counts, files, validation)."""
    logger = get_run_logger()
    run = run_dbt(["build", "--select", "fhir"], warehouse=layout.warehouse, work_dir=layout.dbt_work,
                  vars=profile_vars, on_log=logger.info)
    exported = export_fhir(layout.warehouse, build_dir, seed=seed)
    report = exported.validation
    logger.info("FHIR: %s; validated %d resources%s", exported.counts, report.checked,
                f" of {exported.validated_patients} sampled patients" if exported.validated_patients else "")
    create_table_artifact(
        key="fhir",
        table=[{"resource type": kind, "resources": n, "file": exported.files[kind]}
               for kind, n in exported.counts.items()],
        description=f"FHIR resources in the build; {report.checked} validated with fhir.resources (R4B), "
                    f"{len(report.failures)} invalid")
    if not report.ok:
        shown = "; ".join(f"{label}: {message}" for label, message in report.failures[:3])
        raise ValidationError(f"{len(report.failures)} FHIR resource(s) are invalid (fhir.resources R4B): {shown}")
    return run, {"counts": exported.counts, "files": exported.files, "validated": report.checked,
                 "validated_patients": exported.validated_patients}
