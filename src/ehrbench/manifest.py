"""The build manifest: everything needed to reproduce and audit a published build."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from ehrbench.manifest_parts import DatabaseEntry, DqEntry, FhirEntry, MedsEntry, NoteQaEntry, QuestionsEntry
from ehrbench.settings import BuildParameters

if TYPE_CHECKING:
    from ehrbench.sources.ingest import ReleaseIngest
    from ehrbench.transform import DbtRun
    from ehrbench.validation import SuiteResult

# Packages whose versions change what a build contains.
RECORDED_PACKAGES = ("ehrbench", "prefect", "dbt-core", "dbt-duckdb", "duckdb", "great-expectations",
                     "pyarrow", "pydantic", "numpy")


class InputFile(BaseModel):
    dataset: str
    table: str
    path: str
    required: bool
    status: str  # verified | unverified | absent
    verification: str  # verified | mismatch | unlisted | absent
    sha256: str | None
    expected_sha256: str | None
    rows: int
    action: str  # loaded | unchanged | absent


class StageTiming(BaseModel):
    started_at: datetime
    seconds: float  # wall
    cpu_seconds: float | None = Field(
        default=None, description="CPU seconds of the process that ran the stage (ehrbench.stage_clock): above "
                                  "`seconds` when it used both cores, below when it waited for a core or for I/O. "
                                  "None in builds made before it was recorded")


class Manifest(BaseModel):
    build_id: str
    created_at: datetime
    finished_at: datetime | None = None
    parameters: BuildParameters
    seed: int
    sources: dict[str, dict[str, str]] = Field(description="dataset -> edition, version, dir, origin")
    packages: dict[str, str]
    inputs: list[InputFile]
    raw_row_counts: dict[str, int]
    built_row_counts: dict[str, int]
    dbt: dict[str, dict[str, int]] = Field(default_factory=dict, description="dbt command -> status counts")
    validation: dict[str, dict] = Field(default_factory=dict, description="suite -> GX summary")
    profile_vars: dict[str, dict] = Field(default_factory=dict, description="dbt vars of each database profile")
    databases: dict[str, DatabaseEntry] = Field(default_factory=dict,
                                                description="<profile>/<database> -> schema, files, row counts")
    fhir: FhirEntry = Field(default_factory=FhirEntry, description="FHIR resources: counts per type, files, validation")
    questions: QuestionsEntry = Field(default_factory=QuestionsEntry, description=(
        "generated questions: settings, counts, files, paraphrasing, FHIR grounding, GX validation and quarantine"))
    dq: DqEntry = Field(default_factory=DqEntry, description=(
        "data-quality audit tasks: recipes, extract rows, tasks with their errors, oracle and rule-auditor scores"))
    noteqa: NoteQaEntry = Field(default_factory=NoteQaEntry, description=(
        "note questions (EHRNoteQA-style): notes source (synthetic or MIMIC-IV-Note), counts, files, validation"))
    meds: MedsEntry = Field(default_factory=MedsEntry, description=(
        "MEDS datasets of the build's MIMIC-IV (raw and shifted timelines): subjects, events, codes, splits, files"))
    stages: dict[str, StageTiming] = Field(default_factory=dict)

    @property
    def unverified_inputs(self) -> list[InputFile]:
        return [f for f in self.inputs if f.status == "unverified"]


def package_versions() -> dict[str, str]:
    versions = {}
    for name in RECORDED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def assemble_manifest(build_id: str, created_at: datetime, parameters: BuildParameters,
                      releases: Sequence[ReleaseIngest], dbt_runs: Sequence[DbtRun],
                      validation: Mapping[str, SuiteResult], row_counts: Mapping[str, dict[str, int]],
                      stages: dict[str, StageTiming], profile_vars: dict[str, dict] | None = None,
                      databases: Mapping[str, DatabaseEntry | dict] | None = None, fhir: FhirEntry | dict | None = None,
                      questions: QuestionsEntry | dict | None = None, dq: DqEntry | dict | None = None,
                      noteqa: NoteQaEntry | dict | None = None, meds: MedsEntry | dict | None = None) -> Manifest:
    """The manifest of a finished build from what its stages reported."""
    return Manifest(
        build_id=build_id, created_at=created_at, finished_at=datetime.now(UTC),
        parameters=parameters, seed=parameters.seed,
        sources={r.dataset: {"edition": r.edition, "version": r.version, "dir": r.source_dir, "origin": r.origin}
                 for r in releases},
        packages=package_versions(),
        inputs=[InputFile(dataset=f.dataset, table=f.table, path=f.path, required=f.required, status=f.status,
                          verification=str(f.verification), sha256=f.sha256, expected_sha256=f.expected_sha256,
                          rows=f.rows, action=f.action)
                for r in releases for f in r.files],
        raw_row_counts=row_counts["raw"], built_row_counts=row_counts["built"],
        dbt={" ".join(run.command): run.summary for run in dbt_runs},
        validation={name: {"success": r.success, "evaluated": r.evaluated,
                           "failed": [o.model_dump() for o in r.failed], "skipped": r.skipped}
                    for name, r in validation.items()},
        stages=dict(stages), profile_vars=profile_vars or {}, databases=databases or {}, fhir=fhir or {},
        questions=questions or {}, dq=dq or {}, noteqa=noteqa or {}, meds=meds or {})
