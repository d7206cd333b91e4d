"""Loading the tasks of a build's suites (the types are ehrbench.tasks'), split into what an agent sees (`TaskView`)
and the gold it is scored against (`Gold`). Suites: `ehrsql` and `chatqa` (questions over a database), `fhir`
(questions over the FHIR resources, with resource-id ground truth), `dq` (data-quality audits: the task folder's
instruction and data). Task sets (published task files imported into the data directory, ehrbench.tasksets) load
into the same types: each task runs in its format's agent suite, on its target database of the build (the SQLite
file, as the published scorers run it), with id `<task set>/<published id>` and the task set's protocol."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq

from ehrbench.errors import ConfigError, MissingInputError
from ehrbench.fhir.ids import resource_id
from ehrbench.layout import BuildLayout, TaskSetLayout
from ehrbench.questions.generate import current_time_sentence
from ehrbench.questions.templates import PROFILE_OF
from ehrbench.seeding import keyed_rng
from ehrbench.tasks import SUITES, EvalTask, Gold, TaskView
from ehrbench.tasksets.model import task_id
from ehrbench.tasksets.store import read_manifest, read_tasks


def load_tasks(build_dir: Path, suites: tuple[str, ...] = SUITES, limit: int | None = None,
               seed: int = 0, tasksets: tuple[TaskSetLayout, ...] = ()) -> list[EvalTask]:
    """The tasks of `suites` in a build, then those of `tasksets`; with `limit`, a seeded sample of that many tasks
    per suite and per task set (the same sample for the same seed, whatever else changes)."""
    unknown = sorted(set(suites) - set(SUITES))
    if unknown:
        raise ConfigError(f"unknown suite(s) {', '.join(unknown)}; expected some of {', '.join(SUITES)}")
    layout = BuildLayout(build_dir)
    tasks: list[EvalTask] = []
    for suite in suites:
        found = _dq_tasks(layout) if suite == "dq" else _question_tasks(layout, suite)
        tasks += _sample(found, limit, seed, suite)
    for taskset in tasksets:
        tasks += _sample(taskset_tasks(taskset, build_dir), limit, seed, f"taskset:{taskset.name}")
    return tasks


def taskset_tasks(taskset: TaskSetLayout, build_dir: Path) -> list[EvalTask]:
    """A task set's tasks on `build_dir`, which must be the build it was imported against: its gold answers are that
    build's (ConfigError otherwise, saying how to import it for this build)."""
    manifest = read_manifest(taskset)
    build = BuildLayout(build_dir)
    build_id = json.loads(build.manifest.read_text()).get("build_id") if build.manifest.is_file() else None
    if build_id != manifest.build.build_id:
        raise ConfigError(
            f"task set {manifest.name!r} was imported against build {manifest.build.build_id}, not "
            f"{build_id or build_dir} (its gold answers are that build's): evaluate it with --build "
            f"{manifest.build.build_id}, or import it for this build with 'ehrbench tasks import --build "
            f"{build_id or build_dir} --name <new name>'")
    tasks = []
    for row in read_tasks(taskset):
        profile, _, database = row["target"].partition("/")
        protocol, extra = row["protocol"] or manifest.protocol, json.loads(row["extra"] or "{}")
        view = TaskView(row["suite"], task_id(manifest.name, row["question_id"]), row["db"], row["question"],
                        row["context"], protocol=protocol, current_time=row["current_time"])
        if row["suite"] == "fhir":  # FHIR-AgentBench: a FHIR view of the build, about the patient the task names
            fhir_view = None if database == "mimic_iv" else database  # "mimic_iv": the EHRSQL-aligned view
            view = replace(view, fhir_resources=build.fhir_view_resources(fhir_view),
                           patient_fhir_id=extra.get("patient_fhir_id"))
        else:
            view = replace(view, database=build.database_files(profile, database)[1])
        rows = json.loads(row["answer"]) if row["answer"] is not None else None
        gold = Gold(bool(row["is_answerable"]), row["answer_text"], row["gold_sql_sqlite"],
                    tuple(row["fhir_ids"] or ()), fhir_types=tuple(extra.get("fhir_types") or ()),
                    published_answer=row.get("published_answer"),
                    protocol=protocol, answer_rows=tuple(tuple(cells) for cells in rows) if rows is not None else None,
                    task_type=extra.get("task_type"))
        tasks.append(EvalTask(view, gold))
    return tasks


def _sample(found: list[EvalTask], limit: int | None, seed: int, key: str) -> list[EvalTask]:
    if limit is None or len(found) <= limit:
        return found
    chosen = keyed_rng(seed, "evaluation", key).choice(len(found), size=limit, replace=False)
    return [found[i] for i in sorted(chosen)]


def _question_tasks(layout: BuildLayout, suite: str) -> list[EvalTask]:
    path = layout.questions
    if not path.is_file():
        raise MissingInputError(f"{path}: no questions; expected a build folder with questions/questions.parquet")
    columns = ["question_id", "suite", "db", "question", "context", "is_answerable", "answer_text",
               "gold_sql_duckdb", "fhir_ids", "slot_values"]
    # the gold rows, the task type, the 'now' of the question
    columns += [c for c in ("answer", "extra", "current_time") if c in pq.read_schema(path).names]
    rows = [r for r in pq.read_table(path, columns=columns).to_pylist() if r["suite"] == suite]
    tasks = []
    for row in sorted(rows, key=lambda r: r["question_id"]):
        compatible = PROFILE_OF[row["db"]]
        # EHR-ChatQA's tasks run on the renamed schema
        profile = "renamed" if suite == "chatqa" else compatible.profile
        patient = json.loads(row["slot_values"] or "{}").get("patient_id")
        # builds before the context was written for every suite told only fhir agents their 'now'
        context = row["context"] or (current_time_sentence(row["current_time"]) if row.get("current_time") else None)
        view = TaskView(suite, row["question_id"], row["db"], row["question"], context,
                        database=layout.database_files(profile, compatible.database)[0],
                        fhir_resources=layout.fhir_resources if suite == "fhir" else None,
                        patient_fhir_id=resource_id("Patient", patient) if suite == "fhir" and patient else None)
        gold = Gold(bool(row["is_answerable"]), row["answer_text"], row["gold_sql_duckdb"],
                    tuple(row["fhir_ids"] or ()), answer_rows=_rows(row.get("answer")),
                    task_type=json.loads(row.get("extra") or "{}").get("task_type"))
        tasks.append(EvalTask(view, gold))
    return tasks


def _rows(answer: str | None) -> tuple[tuple, ...] | None:
    """The gold rows of the questions' `answer` column (JSON), as the scorers compare raw cells."""
    return None if answer is None else tuple(tuple(row) for row in json.loads(answer))


def _dq_tasks(layout: BuildLayout) -> list[EvalTask]:
    return [EvalTask(TaskView("dq", task.task_id, None, task.instruction.read_text(), data_dir=task.data),
                     Gold(dq_task_dir=task.root))
            for task in layout.dq_tasks()]
