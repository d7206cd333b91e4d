"""Typed build configuration and the on-disk layout of the project's data directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

Edition = Literal["demo", "full"]


def default_data_dir() -> Path:
    return Path(os.environ.get("EHRBENCH_DATA_DIR", "data")).resolve()


def default_report_dir() -> Path:
    """Where the report site is rendered: the project's reports/site/ unless EHRBENCH_REPORT_DIR says otherwise."""
    return Path(os.environ.get("EHRBENCH_REPORT_DIR", Path(__file__).resolve().parents[2] / "reports" / "site"))


class QuestionSettings(BaseModel):
    """How a build generates its questions (stage questions)."""

    per_template: int = Field(5, ge=1, le=1000, description="Questions per template and database.")
    empty_answer_share: float = Field(0.2, ge=0, le=1, description=(
        "Share of a template's questions that may keep an empty gold answer (labelled empty_by_design); "
        "FHIR-AgentBench kept about 24 %."))
    unanswerable_share: float = Field(0.2, ge=0, lt=1, description=(
        "Share of each database's ehrsql questions that are unanswerable (EHRSQL-2024's valid set: 20 %), spread "
        "over the unanswerable categories."))
    max_quarantine_share: float = Field(0.05, ge=0, le=1, description=(
        "The build fails when more than this share of the generated questions fails validation."))
    paraphrase_model: str | None = Field(None, description=(
        "Chat model that paraphrases the questions (openai:<model>[@<base_url>] or gemini:<model>). Default: "
        "$EHRBENCH_PARAPHRASE_MODEL, else the templates' hand-written phrasings."))


class DqSettings(BaseModel):
    """How a build makes its data-quality audit tasks (stage dq)."""

    recipes: Path | None = Field(None, description=(
        "Recipe file of the audit tasks (YAML: extract size; per task its families, sub-types, tables, patients in "
        "scope, count and seed). Default: the suite's own, src/ehrbench/dq/recipes/default.yaml."))


class BuildParameters(BaseModel):
    """Everything that determines a build; recorded verbatim in its manifest."""

    mimic_iv_dir: Path | None = Field(
        None, description="Local MIMIC-IV release (hosp/, icu/); downloaded from PhysioNet when empty.")
    eicu_dir: Path | None = Field(None, description="Local eICU release; downloaded from PhysioNet when empty.")
    mimic_iv_edition: Edition = Field("demo", description="Which MIMIC-IV release to download: demo or full.")
    eicu_edition: Edition = Field("demo", description="Which eICU release to download: demo or full.")
    strict_checksums: bool = Field(False, description="Fail on local files that do not match SHA256SUMS.txt.")
    seed: int = Field(0, ge=0, description="Seed for every random choice of the build (0 reproduces the "
                                           "published EHRSQL databases).")
    current_time: str | None = Field(None, pattern=r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$", description=(
        "'Now' of the time-shifted databases, YYYY-MM-DD HH:MM:SS; default 2100-12-31 23:59:00 "
        "(per eICU preset)."))
    start_year: int | None = Field(None, ge=1900, description="First year of the shifted range (default 2100).")
    time_span: int | None = Field(None, ge=0, description="Years the shifted first visits spread over (default 0).")
    ehrsql2024_dir: Path | None = Field(None, description=(
        "Published EHRSQL-2024 questions (its mimic_iv/ folder): their valid split gets FHIR resource-id ground "
        "truth in the build. Default: $EHRBENCH_EHRSQL2024_DIR, else none."))
    eicu_preset: Literal["ehrchatqa", "ehrsql2022"] = Field(
        "ehrchatqa", description="eICU time constants: EHR-ChatQA's (2100, span 0) or EHRSQL-2022's (2100-2105).")
    questions: QuestionSettings = Field(default_factory=lambda: QuestionSettings(),
                                        description="How the build's question sets are generated.")
    dq: DqSettings = Field(default_factory=lambda: DqSettings(),
                           description="How the build's data-quality audit tasks are made.")

    @classmethod
    def from_environment(cls, **overrides) -> BuildParameters:
        """Fill source directories from EHRBENCH_MIMIC_IV_DIR / EHRBENCH_EICU_DIR / EHRBENCH_EHRSQL2024_DIR and the
        paraphrasing model from EHRBENCH_PARAPHRASE_MODEL where not given (so the manifest records what was used)."""
        values = {k: v for k, v in overrides.items() if v not in (None, "")}
        for name, variable in (("mimic_iv_dir", "EHRBENCH_MIMIC_IV_DIR"), ("eicu_dir", "EHRBENCH_EICU_DIR"),
                               ("ehrsql2024_dir", "EHRBENCH_EHRSQL2024_DIR")):
            if name not in values and os.environ.get(variable):
                values[name] = os.environ[variable]
        questions = QuestionSettings.model_validate(values.get("questions") or {})
        if questions.paraphrase_model is None and os.environ.get("EHRBENCH_PARAPHRASE_MODEL"):
            questions = questions.model_copy(update={"paraphrase_model": os.environ["EHRBENCH_PARAPHRASE_MODEL"]})
        values["questions"] = questions
        return cls(**values)


class DataLayout(BaseModel):
    """Where things live under the data directory (gitignored)."""

    root: Path

    @property
    def raw(self) -> Path:
        return self.root / "raw"

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse.duckdb"

    @property
    def build_lock(self) -> Path:
        return self.root / "build.lock"

    @property
    def benchmarks(self) -> Path:
        return self.root / "benchmarks"

    @property
    def latest(self) -> Path:
        return self.benchmarks / "latest"

    def build_folder(self, build: str) -> Path:
        """A build named as the CLI takes it: 'latest', a build id under benchmarks/, or a build folder's path."""
        return Path(build) if build != "latest" and Path(build).is_dir() else self.benchmarks / build

    @property
    def results(self) -> Path:
        """Evaluation runs: results/run_id=<id>/part-*.parquet."""
        return self.root / "results"

    def build_logs(self, build_id: str) -> Path:
        """A build's logs (dbt.log, build.log): outside the build folder, so a failed build keeps them too."""
        return self.root / "logs" / build_id

    @property
    def dbt_work(self) -> Path:
        """dbt target/ and logs/ per data directory, so two checkouts never share state."""
        return self.root / "dbt"
