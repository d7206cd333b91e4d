"""The typed parts of a build manifest that the stages report: each benchmark database, the FHIR view, the question
sets and the data-quality audit tasks (`Manifest.databases`, `.fhir`, `.questions`, `.dq`).

A part writes exactly the keys its stage gave: a key left unset is not written as null, so a manifest reads the same
as before these models existed. Keys a model does not name are kept (`extra="allow"`): manifests of older and newer
builds still load, and `ehrbench builds` can list them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer


class ManifestPart(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    @model_serializer(mode="wrap")
    def _given_keys_only(self, handler) -> dict:
        data = handler(self)
        fields = type(self).model_fields
        field_of = {name: name for name in fields} | {f.alias: name for name, f in fields.items() if f.alias}
        written = {}
        for key, value in data.items():
            name = field_of.get(key)
            if name is None:  # a key the model does not name
                written[key] = value
            elif name in self.model_fields_set:  # under the manifest's own key (`schema`)
                written[fields[name].alias or name] = value
        return written


class DatabaseEntry(ManifestPart):
    """`databases["<profile>/<database>"]`: one benchmark database as exported into the build."""

    warehouse_schema: str = Field(alias="schema", description="The warehouse schema it was exported from.")
    duckdb: str = Field(description="The agent-facing DuckDB file, relative to the build folder.")
    sqlite: str = Field(description="The agent-facing SQLite file, relative to the build folder.")
    row_counts: dict[str, int] = Field(default_factory=dict, description="Table → rows.")
    hidden: dict[str, str] = Field(default_factory=dict, description=(
        "Hidden files of the database (lineage, rename_map), relative to the build folder."))


class FhirViewEntry(ManifestPart):
    """The FHIR R4 resources of one view of the build."""

    counts: dict[str, int] = Field(default_factory=dict, description="Resource type → resources.")
    files: dict[str, str] = Field(default_factory=dict, description="Resource type (and duckdb) → file.")
    validated: int = Field(0, description="Resources validated with fhir.resources.")
    validated_patients: int | None = Field(None, description="Patients sampled for validation (None: all).")


class FhirEntry(FhirViewEntry):
    """`fhir`: the FHIR R4 resources of the build: the EHRSQL-aligned view, and the others under `views`."""

    views: dict[str, FhirViewEntry] = Field(default_factory=dict, description=(
        "Other FHIR views by name (mimic_iv_on_fhir: MIMIC-IV on FHIR's resources of every raw row, raw times)."))
    ground_truth: dict[str, dict[str, Any]] = Field(default_factory=dict, description=(
        "Published question sets grounded in the resources (ehrsql2024_valid): file, shares, the dual check."))


class QuestionsEntry(ManifestPart):
    """`questions`: the generated question sets."""

    settings: dict[str, Any] = Field(default_factory=dict, description="The build's QuestionSettings.")
    generated: int = 0
    kept: int = 0
    quarantined: int = 0
    files: dict[str, Any] = Field(default_factory=dict, description="Questions, exports and quarantine files.")
    by_suite: dict[str, int] = Field(default_factory=dict, description="'<suite>/<database>' → questions kept.")
    answerable: int = 0
    empty_by_design: int = 0
    templates: int = 0
    paraphrasing: dict[str, Any] = Field(default_factory=dict, description="Model and acceptance counts.")
    chatqa: dict[str, Any] = Field(default_factory=dict, description="IncreQA and AdaptQA tasks, and dropped ones.")
    fhir_grounding: dict[str, Any] = Field(default_factory=dict, description="Resource-id ground truth shares.")
    validation: dict[str, Any] = Field(default_factory=dict, description=(
        "Great Expectations: failed expectations, quarantine share, coverage targets, Data Docs."))


class AuditTaskEntry(ManifestPart):
    """One audit task (variant) written into `dq/`."""

    task_id: str
    recipe: str
    variant: str
    folder: str
    families: list[str] = Field(default_factory=list)
    clusters: int = 0
    labelled_rows: int = 0
    shortfalls: dict[str, Any] = Field(default_factory=dict, description="Sub-types that found too few rows.")


class CalibrationEntry(ManifestPart):
    """How the oracle and the rule-based auditor score one audit task."""

    task: str
    clusters: int = 0
    oracle_passed: bool = False
    auditor_recall: float | None = None
    auditor_precision: float | None = None
    auditor_f1: float | None = None
    auditor_passed: bool | None = None
    auditor_flagged_rows: int | None = None
    auditor_recall_by_family: dict[str, float] = Field(default_factory=dict)


class DqEntry(ManifestPart):
    """`dq`: the data-quality audit tasks."""

    recipes: str | None = Field(None, description="The recipe file used.")
    recipe_book: dict[str, Any] = Field(default_factory=dict, description="The recipes, as loaded.")
    extract_rows: dict[str, int] = Field(default_factory=dict, description="Audit extract table → rows.")
    tasks: list[AuditTaskEntry] = Field(default_factory=list)
    calibration: list[CalibrationEntry] = Field(default_factory=list)


class NoteQaEntry(ManifestPart):
    """`noteqa`: the note questions (EHRNoteQA-style) and the discharge summaries they are asked over."""

    notes_source: str | None = Field(None, description=(
        "synthetic (written by ehrbench from structured rows, labelled so) or mimic_iv_note."))
    notes_times: str | None = Field(None, description=(
        "The notes' charttime: as written from the raw rows (synthetic), or shifted by the ehrsql2024 profile's "
        "per-patient offsets (MIMIC-IV-Note's, so that a note lines up with its admission in the databases)."))
    notes: int = Field(0, description="Discharge summaries available.")
    patients_with_notes: int = 0
    patients_asked: int = Field(0, description="Patients asked about (at most questions.note_patients, sampled).")
    generated: int = 0
    kept: int = 0
    quarantined: int = 0
    seed: int | None = None
    generator: str | None = Field(None, description="template, or llm:<model spec> (the note-question model).")
    llm_generation: dict[str, Any] = Field(default_factory=dict, description=(
        "LLM-written questions: patients asked, kept, rejected by filter."))
    files: dict[str, Any] = Field(default_factory=dict, description="Questions, notes, exports and quarantine files.")
    by_level: dict[str, int] = Field(default_factory=dict, description="Level1 / Level2 → questions kept.")
    by_num_notes: dict[str, int] = Field(default_factory=dict, description="Notes asked over → questions kept.")
    by_template: dict[str, int] = Field(default_factory=dict, description="Template → questions kept.")
    validation: dict[str, Any] = Field(default_factory=dict, description="Great Expectations summary.")


class MedsTimelineEntry(ManifestPart):
    """One MEDS dataset of the build (`meds/<timeline>/`)."""

    subjects: int = 0
    events: int = 0
    static_events: int = Field(0, description="Events without a time (GENDER//…).")
    codes: int = 0
    shards: int = 0
    splits: dict[str, int] = Field(default_factory=dict, description="train / tuning / held_out → subjects.")
    first_time: str | None = None
    last_time: str | None = None
    files: list[str] = Field(default_factory=list)


class ConversionTaskEntry(ManifestPart):
    """One MEDS conversion task (`workspace_tasks/meds_conversion/<task_id>/`,
    docs/benchmarks.md#meds-conversion-tasks), drawn from the build's seed."""

    task_id: str
    tables: list[str] = Field(default_factory=list)
    customisations: list[str] = Field(default_factory=list, description="The seeded changes to the standard mapping.")
    subjects: int = 0
    events: int = Field(0, description="Events of the gold.")
    content_sha256: str | None = None


class ModellingTaskEntry(ManifestPart):
    """One event-modelling task (`workspace_tasks/event_modelling/<task_id>/`,
    docs/benchmarks.md#event-modelling-tasks): its target, cohort and baseline."""

    task_id: str
    target: str | None = Field(None, description="The ACES regex of the new-onset diagnosis.")
    train_rows: int = 0
    train_positive_rows: int = 0
    test_subjects: int = 0
    test_positive: int = 0
    baseline_auroc: float | None = None


class MedsEntry(ManifestPart):
    """`meds`: the build's MIMIC-IV as MEDS datasets, checked against the `meds` package's schemas, and the MEDS
    conversion tasks made from its raw files."""

    meds_version: str | None = None
    convention: str | None = Field(None, description="Whose event configuration the codes follow.")
    timelines: dict[str, MedsTimelineEntry] = Field(default_factory=dict, description=(
        "raw (MIMIC-IV's own times), shifted (the ehrsql2024 and renamed databases' patients and times) and eicu "
        "(eICU-CRD on the eICU-MEDS ETL's pseudo-timeline)."))
    conversion_tasks: list[ConversionTaskEntry] = Field(default_factory=list)
    modelling_tasks: list[ModellingTaskEntry] = Field(default_factory=list)
