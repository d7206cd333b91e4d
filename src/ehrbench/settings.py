"""Typed build configuration (the data directory's layout is ehrbench.layout's)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ehrbench.environment import environment

Edition = Literal["demo", "full"]
NotesSource = Literal["synthetic", "mimic_iv_note"]  # what the noteqa suite asks over

# Parameter ranges (issue 17): a value outside them is refused before any Prefect server or build starts, in one line
# naming the parameter, the value and the range (ehrbench.parameter_errors).
SEED_MAX = 2**32 - 1  # seeds feed numpy's default_rng and random.Random; 32 bits is the range every RNG API takes
# The shifted years keep four digits: the EHRSQL time expressions run on the .sqlite exports, whose date functions
# (like Python's date in the eICU sampler) end at 9999. 9000 + 200 leaves centuries for patients' later stays.
START_YEAR_MIN, START_YEAR_MAX = 1900, 9000
# The sampler weighs every year of the span (numpy arrays of span + 1): 10^9 took 20 GB. EHRSQL uses 0 and 5 years;
# 200 covers any plausible spread of first visits.
TIME_SPAN_MAX = 200
# A run id names the folder results/run_id=<id>: one plain path component (also checked by the CLI).
RUN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}")
RUN_ID_FORM = "1-200 letters, digits, '.', '_' or '-', not starting with '.' and without '..'"
RUN_PREFIX_MAX = 184  # + the 16 characters of the UTC time: a run id of at most 200
# A task set's name is a folder name and the first part of its tasks' ids (ehrbench.tasksets.model.NAME)
TASKSET_NAME_MAX = 100
TASKSET_NAME_FORM = "1-100 letters, digits, '.', '_' or '-', not starting with '.' and without '..'"


def is_run_id(text: str) -> bool:
    return bool(RUN_ID.fullmatch(text)) and ".." not in text


def default_data_dir() -> Path:
    """The data directory: $EHRBENCH_DATA_DIR, else ./data."""
    return environment().data_dir.resolve()


def default_report_dir() -> Path:
    """Where the report site is rendered: the project's reports/site/ unless EHRBENCH_REPORT_DIR says otherwise."""
    return environment().report_dir


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
    note_question_model: str | None = Field(None, description=(
        "Chat model that writes the noteqa questions over the notes, EHRNoteQA-style, and (without the notes) "
        "rejects the guessable ones (openai:<model>[@<base_url>] or gemini:<model>). Default: "
        "$EHRBENCH_NOTE_QUESTION_MODEL, else template questions over the synthetic notes' known facts."))
    note_patients: int = Field(1000, ge=1, le=1_000_000, description=(
        "Most patients the noteqa suite asks about, one question each (a seeded sample when more patients have "
        "notes; EHRNoteQA asks 962). Bounds the note-question model's calls on the full MIMIC-IV-Note."))


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
    mimic_iv_note_dir: Path | None = Field(None, description=(
        "Local MIMIC-IV-Note 2.2 release (note/discharge.csv.gz, ...): the noteqa suite then asks over its discharge "
        "summaries."))
    notes: NotesSource | None = Field(None, description=(
        "Notes the noteqa suite asks over: 'synthetic' (written by the build from the structured rows) or "
        "'mimic_iv_note' (the credentialed release: the local copy of mimic_iv_note_dir, else downloaded with "
        "PHYSIONET_USERNAME/PASSWORD; needs a note-question model). Default: mimic_iv_note when mimic_iv_note_dir is "
        "given, else synthetic."))
    mimic_iv_edition: Edition = Field("demo", description="Which MIMIC-IV release to download: demo or full.")
    eicu_edition: Edition = Field("demo", description="Which eICU release to download: demo or full.")
    strict_checksums: bool = Field(False, description="Fail on local files that do not match SHA256SUMS.txt.")
    seed: int = Field(0, ge=0, le=SEED_MAX, description="Seed for every random choice of the build (0 reproduces "
                                                        "the published EHRSQL databases).")
    current_time: str | None = Field(None, pattern=r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$", description=(
        "'Now' of the time-shifted databases, YYYY-MM-DD HH:MM:SS; default 2100-12-31 23:59:00 "
        "(per eICU preset)."))
    start_year: int | None = Field(None, ge=START_YEAR_MIN, le=START_YEAR_MAX,
                                   description="First year of the shifted range (default 2100).")
    time_span: int | None = Field(None, ge=0, le=TIME_SPAN_MAX,
                                  description="Years the shifted first visits spread over (default 0).")
    ehrsql2024_dir: Path | None = Field(None, description=(
        "Published EHRSQL-2024 questions (its mimic_iv/ folder): their valid split gets FHIR resource-id ground "
        "truth in the build. Default: $EHRBENCH_EHRSQL2024_DIR, else none."))
    mimic_iv_on_fhir: bool = Field(True, description=(
        "Also build the mimic_iv_on_fhir FHIR view: MIMIC-IV on FHIR's resources of every raw row, the data "
        "FHIR-AgentBench was built on (~500k resources from the demo; from the full MIMIC-IV, hundreds of millions)."))
    eicu_preset: Literal["ehrchatqa", "ehrsql2022"] = Field(
        "ehrchatqa", description="eICU settings: EHR-ChatQA's (2100, span 0, every patient) or EHRSQL (2022)'s "
        "(2100-2105, 1,000 patients of whom 10 % current, de-identified; ehrsql_eicu only).")
    questions: QuestionSettings = Field(default_factory=lambda: QuestionSettings(),
                                        description="How the build's question sets are generated.")
    dq: DqSettings = Field(default_factory=lambda: DqSettings(),
                           description="How the build's data-quality audit tasks are made.")

    @classmethod
    def from_environment(cls, **overrides) -> BuildParameters:
        """Fill source directories from EHRBENCH_MIMIC_IV_DIR / EHRBENCH_EICU_DIR / EHRBENCH_MIMIC_IV_NOTE_DIR /
        EHRBENCH_EHRSQL2024_DIR and the question models from EHRBENCH_PARAPHRASE_MODEL / EHRBENCH_NOTE_QUESTION_MODEL
        where not given (so the manifest records what was used). notes='synthetic' leaves the MIMIC-IV-Note
        directory of the environment unused."""
        values = {k: v for k, v in overrides.items() if v not in (None, "")}
        env = environment()
        for name in SOURCE_DIRS:
            if name == "mimic_iv_note_dir" and values.get("notes") == "synthetic":
                continue
            if name not in values and getattr(env, name):
                values[name] = getattr(env, name)
        values["questions"] = _with_models(values.get("questions") or {},
                                           {name: getattr(env, name) for name in QUESTION_MODELS})
        return cls(**values)  # validated whole: an error's location names the nested field (questions.per_template)

    @property
    def notes_source(self) -> NotesSource:
        """The notes the noteqa suite asks over (see `notes`)."""
        return self.notes or ("mimic_iv_note" if self.mimic_iv_note_dir else "synthetic")

    @model_validator(mode="after")
    def _real_notes_need_a_writer(self) -> BuildParameters:
        # template questions exist only for the synthetic notes, whose facts the build knows
        if self.notes_source == "mimic_iv_note" and not self.questions.note_question_model:
            raise ValueError("notes from MIMIC-IV-Note need a note-question model to write their questions "
                             "(questions.note_question_model, --note-question-model or EHRBENCH_NOTE_QUESTION_MODEL); "
                             "template questions exist only for synthetic notes")
        if self.notes == "synthetic" and self.mimic_iv_note_dir:
            raise ValueError("notes='synthetic' contradicts mimic_iv_note_dir; give one of them")
        return self


SOURCE_DIRS = ("mimic_iv_dir", "eicu_dir", "mimic_iv_note_dir", "ehrsql2024_dir")  # filled from EHRBENCH_<NAME>
QUESTION_MODELS = ("paraphrase_model", "note_question_model")  # question settings an EHRBENCH_* variable fills


def _with_models(questions: QuestionSettings | dict, models: dict[str, str | None]) -> QuestionSettings | dict:
    """The question settings with the environment's models (`models`) where they name none."""
    if isinstance(questions, QuestionSettings):
        missing = {name: model for name, model in models.items() if model and not getattr(questions, name)}
        return questions.model_copy(update=missing) if missing else questions
    return {**questions, **{name: questions.get(name) or model for name, model in models.items()}}


class EvaluationParameters(BaseModel):
    """The ranges of the evaluate-agents flow's parameters (the flow and `ehrbench evaluate` check them first)."""

    suites: list[str] | None = Field(None, min_length=1, description=(
        "Suites to evaluate; none given: every suite, unless task sets are given (then only those)"))
    tasksets: list[str] = Field(default_factory=list, max_length=50, description=(
        "Imported task sets to evaluate (ehrbench tasks import), each like a suite"))
    agents: list[str | dict] = Field(min_length=1, max_length=50, description=(
        "Agents to evaluate; each is a full pass over every task and trial, so a sweep wider than 50 is several runs"))
    trials: int = Field(1, ge=1, le=100, description=(
        "Trials per task (k); pass^k curves rarely go past k=8, 100 bounds the cost of a typo"))
    limit: int | None = Field(None, ge=1, le=1_000_000, description=(
        "Tasks per suite (a seeded sample); more than a suite holds means all of it"))
    seed: int = Field(0, ge=0, le=SEED_MAX, description="Seed of the task sample.")
    run_id: str | None = Field(None, description="Run id (the folder results/run_id=<id>).")
    run_prefix: str = Field("", max_length=RUN_PREFIX_MAX, description="Prefix of the run id before its UTC time.")
    batch_size: int = Field(200, ge=1, le=10_000, description=(
        "Trials per results part; a batch's rows and futures are held in memory until it is written"))
    concurrency_per_endpoint: int = Field(4, ge=1, le=64, description=(
        "Trials in flight per model endpoint; each holds a thread and its database connections"))
    transient_retries: int = Field(2, ge=0, le=10, description="Retries of a trial stopped by a transient failure.")
    retry_delay_s: float = Field(30.0, ge=0, le=3600, description=(
        "Seconds between retries of a trial; rate-limit windows are a minute, an hour stalls a run enough"))
    judge_votes: int = Field(1, ge=1, le=15, description=(
        "Times the noteqa judge is asked per answer, the majority deciding (EHRNoteQA asks once)"))

    @field_validator("suites")
    @classmethod
    def _known_suites_once(cls, suites: list[str] | None) -> list[str] | None:
        from ehrbench.tasks import SUITES

        if suites is None:
            return None
        unknown = [suite for suite in suites if suite not in SUITES]
        if unknown:
            raise ValueError(f"must be some of {', '.join(SUITES)}; unknown: {', '.join(map(repr, unknown))}")
        if len(set(suites)) < len(suites):
            raise ValueError("must name each suite once")
        return suites

    @field_validator("tasksets")
    @classmethod
    def _task_set_names_once(cls, names: list[str]) -> list[str]:
        bad = [name for name in names if not is_run_id(name) or len(name) > TASKSET_NAME_MAX]
        if bad:
            raise ValueError(f"must be task set names ({TASKSET_NAME_FORM}); not: {', '.join(map(repr, bad))}")
        if len(set(names)) < len(names):
            raise ValueError("must name each task set once")
        return names

    def chosen_suites(self) -> list[str]:
        """The suites the run evaluates: those given; none given, every suite — unless task sets are given."""
        from ehrbench.tasks import SUITES

        return list(self.suites) if self.suites is not None else ([] if self.tasksets else list(SUITES))

    @field_validator("run_id", "run_prefix")
    @classmethod
    def _one_path_component(cls, name: str | None) -> str | None:
        if name and not is_run_id(name):
            raise ValueError(f"must be {RUN_ID_FORM}")
        return name


class ReportParameters(BaseModel):
    """The ranges of the render-report flow's numbers (the flow and `ehrbench report` check them first)."""

    bootstrap_replicates: int = Field(1000, ge=0, le=100_000, description=(
        "Bootstrap replicates of the intervals; percentile intervals settle by 10,000"))
    bootstrap_seed: int = Field(0, ge=0, le=SEED_MAX, description="Seed of the bootstrap.")
