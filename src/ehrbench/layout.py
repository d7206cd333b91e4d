"""Where things live on disk, named once: the data directory (`DataLayout`) and, inside it, one build folder
(`BuildLayout`) with an audit task's folder (`AuditTaskLayout`), and one imported task set (`TaskSetLayout`).

A build folder's relative paths are a contract: published builds already hold them, and the evaluation, the report,
the FHIR endpoint and other people's tools read them. tests/unit/test_layout.py pins every one of them.

    <data dir>/                        DataLayout
      raw/  warehouse.duckdb  build.lock  dbt/  logs/<build_id>/  results/run_id=<id>/
      tasksets/<name>/                 TaskSetLayout: manifest.json, tasks.parquet (hidden: gold), notes.parquet
                                       (note QA: the notes asked over); written as
                                       tasksets/.<name>.<hex>.tmp/ and renamed into place
      benchmarks/<build_id>/           BuildLayout (while it is written: <build_id>.tmp/), latest -> newest good build
        manifest.json
        db/<profile>/<database>.duckdb|.sqlite                               agent-facing
        fhir/<ResourceType>.ndjson.gz, fhir/resources.duckdb                 agent-facing (FHIR tools, endpoint)
        fhir/mimic_iv_on_fhir/<ResourceType>.ndjson.gz, …/resources.duckdb   agent-facing (FHIR-AgentBench's view)
        hidden/lineage/<profile>/<database>.parquet                          hidden
        hidden/rename_maps/<profile>/<database>.json                         hidden
        hidden/fhir_ground_truth/<name>.parquet                              hidden
        questions/questions.parquet                                          hidden (gold; tasks are served from it)
        exports/ehrsql2024/{data,label,answer}.json, exports/chatqa/*.json   hidden (gold, in published formats)
        quarantine/questions.parquet                                         hidden (authors')
        reports/gx/index.html                                                authors' (served over HTTP)
        dq/<task_id>/instruction.md, data/<table>.csv.gz                     agent-facing
        dq/<task_id>/gold/labels.parquet, gold/task.json                     hidden
        noteqa/questions.parquet                                             hidden (gold; tasks are served from it)
        noteqa/notes.parquet | noteqa/synthetic_notes.parquet                agent-facing (the notes asked over)
        exports/ehrnoteqa/EHRNoteQA.jsonl, …/note/discharge.csv.gz             hidden (gold, EHRNoteQA's formats;
                                                                             …/synthetic_note/ for synthetic notes)
        quarantine/noteqa.parquet                                            hidden (authors')
        meds/<raw|shifted>/data/<shard>.parquet, …/metadata/{codes.parquet, subject_splits.parquet, dataset.json}
                                                                             agent-facing (MEDS datasets)

This module imports nothing of ehrbench: every other part may use it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class TaskFolder:
    """What every task folder of a build holds: the instruction the agent is given and its hidden gold."""

    root: Path

    @property
    def task_id(self) -> str:
        return self.root.name

    @property
    def instruction(self) -> Path:
        """`instruction.md`: what the agent is asked to do (agent-facing)."""
        return self.root / "instruction.md"

    @property
    def gold(self) -> Path:
        """`gold/`: the task's answer key (hidden)."""
        return self.root / "gold"

    @property
    def task_json(self) -> Path:
        """`gold/task.json`: the task's parameters, seed and expected figures (hidden)."""
        return self.gold / "task.json"


@dataclass(frozen=True)
class AuditTaskLayout(TaskFolder):
    """One data-quality audit task's folder, `dq/<task_id>/` of a build (also the `_clues` variant's)."""

    @property
    def data(self) -> Path:
        """`data/`: the audited tables, `<table>.csv.gz` (agent-facing)."""
        return self.root / "data"

    def data_file(self, table: str) -> Path:
        """`data/<table>.csv.gz`: one audited table (agent-facing)."""
        return self.data / f"{table}.csv.gz"

    @property
    def labels(self) -> Path:
        """`gold/labels.parquet`: every injected error's rows and values, by cluster (hidden)."""
        return self.gold / "labels.parquet"


@dataclass(frozen=True)
class WorkspaceTaskLayout(TaskFolder):
    """A workspace task (docs/benchmarks.md#workspace-tasks): its instruction, the folder the agent starts from
    (copied fresh for every trial) and the hidden gold its verifier reads."""

    @property
    def workspace(self) -> Path:
        """The workspace's starting content (the instruction is copied in beside it)."""
        return self.root / "workspace"


@dataclass(frozen=True)
class BuildLayout:
    """Every path inside one build folder (`benchmarks/<build_id>/`, or `<build_id>.tmp/` while it is written).

    "Agent-facing" files are what an agent under evaluation may be given; "hidden" ones hold gold, lineage or
    renames and are read only by the build, the evaluation and the report."""

    root: Path

    def relative(self, path: Path) -> str:
        """`path` as the manifest records it: relative to the build folder."""
        return str(path.relative_to(self.root))

    # --- the build's own records ---------------------------------------------------------------------------------

    @property
    def manifest(self) -> Path:
        """`manifest.json`: parameters, inputs, stages, counts and files of the build; written last, when it is
        published (a folder without one is no published build). Not given to agents."""
        return self.root / MANIFEST

    @property
    def owner(self) -> Path:
        """`.owner.json`: which process writes a staging folder, since when; removed before publishing."""
        return self.root / ".owner.json"

    # --- databases (stage databases) -------------------------------------------------------------------------------

    @property
    def db(self) -> Path:
        """`db/`: the benchmark databases (agent-facing)."""
        return self.root / "db"

    def database_files(self, profile: str, database: str) -> tuple[Path, Path]:
        """`db/<profile>/<database>.duckdb` and `.sqlite`: one benchmark database as stand-alone files
        (agent-facing)."""
        stem = self.db / profile / database
        return stem.with_suffix(".duckdb"), stem.with_suffix(".sqlite")

    @property
    def hidden(self) -> Path:
        """`hidden/`: what agents must not see (lineage, renames, FHIR ground truth)."""
        return self.root / "hidden"

    def lineage(self, key: str) -> Path:
        """`hidden/lineage/<profile>/<database>.parquet` (`key` = `<profile>/<database>`): every benchmark row's
        source table, raw row and source key (hidden)."""
        return self.hidden / "lineage" / f"{key}.parquet"

    def rename_map(self, key: str) -> Path:
        """`hidden/rename_maps/<profile>/<database>.json` (`key` = `<profile>/<database>`): the map from the
        compatibility schema's names to a renamed profile's (hidden)."""
        return self.hidden / "rename_maps" / f"{key}.json"

    # --- FHIR view (stage fhir) ------------------------------------------------------------------------------------

    @property
    def fhir(self) -> Path:
        """`fhir/`: the FHIR R4 resources (agent-facing through the FHIR tools and endpoint)."""
        return self.root / "fhir"

    @property
    def fhir_resources(self) -> Path:
        """`fhir/resources.duckdb`: every resource as JSON, view `resources` over the view's tables (agent-facing
        through the FHIR tools and endpoint)."""
        return self.fhir_view_resources(None)

    def fhir_ndjson(self, resource_type: str, view: str | None = None) -> Path:
        """`fhir/[<view>/]<ResourceType>.ndjson.gz`: one resource per line; by the view's table (one per FHIR dbt
        model, in name order), each table's resources in id order (agent-facing)."""
        return self.fhir_view(view) / f"{resource_type}.ndjson.gz"

    def fhir_view(self, view: str | None) -> Path:
        """`fhir/` (the EHRSQL-aligned view: view None) or `fhir/<view>/` (another FHIR view, e.g. `mimic_iv_on_fhir`,
        the resources FHIR-AgentBench was built on)."""
        return self.fhir / view if view else self.fhir

    def fhir_view_resources(self, view: str | None) -> Path:
        """`fhir/[<view>/]resources.duckdb`: a view's resources as JSON, view `resources` (agent-facing)."""
        return self.fhir_view(view) / "resources.duckdb"

    def fhir_ground_truth(self, name: str) -> Path:
        """`hidden/fhir_ground_truth/<name>.parquet`: the resource ids each question's answer needs, e.g.
        `ehrsql2024_valid` (hidden)."""
        return self.hidden / "fhir_ground_truth" / f"{name}.parquet"

    # --- questions (stage questions) -------------------------------------------------------------------------------

    @property
    def questions(self) -> Path:
        """`questions/questions.parquet`: every question of every suite with its gold (hidden; the evaluation shows
        agents the question text only)."""
        return self.root / "questions" / "questions.parquet"

    @property
    def exports(self) -> Path:
        """`exports/`: the question sets in their published formats, gold included (hidden)."""
        return self.root / "exports"

    @property
    def ehrsql2024_export(self) -> Path:
        """`exports/ehrsql2024/`: `data.json`, `label.json`, `answer.json` in EHRSQL-2024's format (hidden)."""
        return self.exports / "ehrsql2024"

    @property
    def chatqa_export(self) -> Path:
        """`exports/chatqa/`: `<db>_{incre,adapt}.json` in EHR-ChatQA's task format and `task_ids.json` (hidden)."""
        return self.exports / "chatqa"

    @property
    def quarantine(self) -> Path:
        """`quarantine/`: generated artefacts that failed validation, `<artefact>.parquet` (hidden; the authors'
        report shows them)."""
        return self.root / "quarantine"

    @property
    def question_quarantine(self) -> Path:
        """`quarantine/questions.parquet`: the questions that failed Great Expectations (hidden)."""
        return self.quarantine / "questions.parquet"

    @property
    def gx_docs(self) -> Path:
        """`reports/gx/`: Great Expectations Data Docs of the questions (for authors; served over HTTP, never to
        agents)."""
        return self.root / "reports" / "gx"

    @property
    def gx_index(self) -> Path:
        """`reports/gx/index.html`: the Data Docs' front page."""
        return self.gx_docs / "index.html"

    # --- note QA (stage noteqa) -----------------------------------------------------------------------------------

    @property
    def noteqa(self) -> Path:
        """`noteqa/`: the note questions and the discharge summaries they are asked over."""
        return self.root / "noteqa"

    @property
    def noteqa_questions(self) -> Path:
        """`noteqa/questions.parquet`: one row per note question in EHRNoteQA's layout, with its gold and provenance
        (hidden)."""
        return self.noteqa / "questions.parquet"

    def noteqa_notes(self, synthetic: bool) -> Path:
        """`noteqa/notes.parquet` (MIMIC-IV-Note) or `noteqa/synthetic_notes.parquet` (written by ehrbench): the
        discharge summaries the questions are asked over, in MIMIC-IV-Note's columns (agent-facing)."""
        return self.noteqa / ("synthetic_notes.parquet" if synthetic else "notes.parquet")

    @property
    def ehrnoteqa_export(self) -> Path:
        """`exports/ehrnoteqa/`: `EHRNoteQA.jsonl` and `note/discharge.csv.gz` (`synthetic_note/` for synthetic
        notes), the files EHRNoteQA's own preprocessing reads (hidden)."""
        return self.exports / "ehrnoteqa"

    @property
    def noteqa_quarantine(self) -> Path:
        """`quarantine/noteqa.parquet`: the note questions that failed Great Expectations (hidden)."""
        return self.quarantine / "noteqa.parquet"

    # --- MEDS datasets (stage meds) ----------------------------------------------------------------------------------

    def meds(self, timeline: str) -> Path:
        """`meds/<timeline>/`: the build's MIMIC-IV as a MEDS dataset, `raw` (MIMIC-IV's times) or `shifted` (the
        databases' patients and times): `data/<shard>.parquet` and `metadata/` (agent-facing)."""
        return self.root / "meds" / timeline

    # --- data-quality audit tasks (stage dq) -----------------------------------------------------------------------

    @property
    def dq(self) -> Path:
        """`dq/`: one folder per audit task and variant."""
        return self.root / "dq"

    def dq_task(self, task_id: str) -> AuditTaskLayout:
        """`dq/<task_id>/`: one audit task (agent-facing instruction and data; hidden `gold/`)."""
        return AuditTaskLayout(self.dq / task_id)

    def workspace_tasks_of(self, family: str) -> list[WorkspaceTaskLayout]:
        """A family's workspace tasks (e.g. meds_conversion) present (written whole: the instruction comes last)."""
        folder = self.root / "workspace_tasks" / family
        return [WorkspaceTaskLayout(path.parent) for path in sorted(folder.glob("*/instruction.md"))]

    def workspace_task(self, family: str, task_id: str) -> WorkspaceTaskLayout:
        return WorkspaceTaskLayout(self.root / "workspace_tasks" / family / task_id)

    def dq_tasks(self) -> list[AuditTaskLayout]:
        """The audit tasks present (folders with an `instruction.md`), by task id."""
        return [AuditTaskLayout(path.parent) for path in sorted(self.dq.glob("*/instruction.md"))]


@dataclass(frozen=True)
class TaskSetLayout:
    """One imported task set, `tasksets/<name>/` of the data directory: a published benchmark's task file turned into
    tasks of an agent suite (`ehrbench tasks import`). Hidden: it holds the gold."""

    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def manifest(self) -> Path:
        """`manifest.json`: format, protocol, source files with their SHA-256, the build and databases it targets,
        and the reproduction report of its published answers; written with the tasks, before the folder appears."""
        return self.root / MANIFEST

    @property
    def tasks(self) -> Path:
        """`tasks.parquet`: one row per task, in the columns of a build's `questions/questions.parquet`."""
        return self.root / "tasks.parquet"

    @property
    def notes(self) -> Path:
        """`notes.parquet`: the notes a note-QA task set's questions are asked over (MIMIC-IV-Note's columns), copied
        in on import so the evaluation needs no credentialed file."""
        return self.root / "notes.parquet"


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
    def side_stage_inputs(self) -> Path:
        """A build's copy of what the dq, noteqa and meds stages read (ehrbench.side_stages), deleted when it ends."""
        return self.root / "side_stage_inputs.duckdb"

    @property
    def benchmarks(self) -> Path:
        return self.root / "benchmarks"

    @property
    def latest(self) -> Path:
        return self.benchmarks / "latest"

    def build_folder(self, build: str) -> Path:
        """A build named as the CLI takes it: 'latest', a build id under benchmarks/, or a build folder's path."""
        return Path(build) if build != "latest" and Path(build).is_dir() else self.benchmarks / build

    def build(self, build: str) -> BuildLayout:
        """The layout of a build named as the CLI takes it (see `build_folder`)."""
        return BuildLayout(self.build_folder(build))

    @property
    def results(self) -> Path:
        """Evaluation runs: results/run_id=<id>/part-*.parquet."""
        return self.root / "results"

    @property
    def tasksets(self) -> Path:
        """Imported task sets: tasksets/<name>/ (outside every build: one task set is evaluated on its build)."""
        return self.root / "tasksets"

    def taskset(self, name: str) -> TaskSetLayout:
        """The folder of the task set `name` (it may not exist)."""
        return TaskSetLayout(self.tasksets / name)

    def build_logs(self, build_id: str) -> Path:
        """A build's logs (dbt.log, build.log): outside the build folder, so a failed build keeps them too."""
        return self.root / "logs" / build_id

    @property
    def dbt_work(self) -> Path:
        """dbt target/ and logs/ per data directory, so two checkouts never share state."""
        return self.root / "dbt"


def write_once(path: Path, write: Callable[[Path], object]) -> None:
    """Files of a build are written once, whole: `write(temporary path)`, then renamed to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        raise FileExistsError(f"{path} exists; the files of a build are written once")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
