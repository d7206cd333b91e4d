"""Loading the tasks of a build's suites (the types are ehrbench.tasks'), split into what an agent sees (`TaskView`)
and the gold it is scored against (`Gold`). Suites: `ehrsql` and `chatqa` (questions over a database), `fhir`
(questions over the FHIR resources, with resource-id ground truth), `dq` (data-quality audits: the task folder's
instruction and data), `noteqa` (EHRNoteQA-style questions over a patient's discharge summaries: each question is two
tasks, `<id>-multichoice` and `<id>-openended`, with the notes block in the view). Task sets (published task files
imported into the data directory, ehrbench.tasksets) load into the same types: each task runs in its format's agent
suite, on its target database of the build (the SQLite file, as the published scorers run it; a note-QA task set over
its own notes), with id `<task set>/<published id>` and the task set's protocol."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq

from ehrbench.errors import ConfigError, MissingInputError
from ehrbench.fhir.ids import resource_id
from ehrbench.layout import BuildLayout, TaskSetLayout
from ehrbench.noteqa.published import FORMATS, LETTERS, notes_block
from ehrbench.noteqa.suite import read_notes_file
from ehrbench.questions.generate import current_time_sentence
from ehrbench.questions.templates import PROFILE_OF
from ehrbench.scoring.ehrnoteqa import PROTOCOL as NOTEQA_PROTOCOL
from ehrbench.seeding import keyed_rng
from ehrbench.tasks import SUITES, WORKSPACE_SUITES, EvalTask, Gold, TaskView
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
        if suite == "noteqa" and suites == SUITES and not layout.noteqa_questions.is_file():
            continue  # a build from before the noteqa suite: "every suite" is the ones it has
        if suite == "noteqa":
            found = _noteqa_tasks(layout, seed)
        elif suite in WORKSPACE_SUITES:
            found = _workspace_tasks(layout, suite)
            if not found and suites != SUITES:
                raise ConfigError(f"build {build_dir} has no {suite} tasks (workspace_tasks/{suite}/): it was built "
                                  "before they existed; rebuild it to evaluate them")
        else:
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
    notes = read_notes_file(taskset.notes) if taskset.notes.is_file() else {}
    for row in read_tasks(taskset):
        profile, _, database = row["target"].partition("/")
        protocol, extra = row["protocol"] or manifest.protocol, json.loads(row["extra"] or "{}")
        if row["suite"] == "noteqa":  # EHRNoteQA: both formats over the task set's own notes
            tasks += _note_tasks(row["question_id"], row["db"], row["question"], extra["choices"],
                                 row["published_answer"], [notes[i] for i in extra["note_ids"]], protocol,
                                 lambda kind, row=row: task_id(manifest.name, f"{row['question_id']}-{kind}"), 0)
            continue
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


def _noteqa_tasks(layout: BuildLayout, seed: int) -> list[EvalTask]:
    """Both formats of every note question, over the notes block EHRNoteQA's prompt shows (headed, cleaned notes in
    charttime order). `seed` is what a trial's option shuffle draws from (ehrbench.noteqa.options)."""
    path = layout.noteqa_questions
    notes_file = next((f for f in (layout.noteqa_notes(True), layout.noteqa_notes(False)) if f.is_file()), None)
    if not path.is_file() or notes_file is None:
        raise MissingInputError(f"{layout.noteqa}: no note questions or notes; expected a build folder with "
                                f"noteqa/questions.parquet and its notes (built by the noteqa stage)")
    notes = read_notes_file(notes_file)
    tasks = []
    for row in sorted(pq.read_table(path).to_pylist(), key=lambda r: r["question_id"]):
        missing = [note_id for note_id in row["note_ids"] if note_id not in notes]
        if missing:
            raise MissingInputError(f"{notes_file}: note(s) {', '.join(missing)} of note question "
                                    f"{row['question_id']} are missing")
        tasks += _note_tasks(row["question_id"], row["db"], row["question"],
                             [row[f"choice_{letter}"] for letter in LETTERS], row["answer"],
                             [notes[note_id] for note_id in row["note_ids"]], NOTEQA_PROTOCOL,
                             lambda kind, row=row: f"{row['question_id']}-{kind}", seed)
    return tasks


def _note_tasks(question_id: str, db: str, question: str, choices: list[str], answer: str, notes: list,
                protocol: str, task_id_of, seed: int) -> list[EvalTask]:
    """A note question's two tasks (multiple-choice, open-ended) over its notes, headed and in order, as EHRNoteQA's
    prompt shows them; the gold is the answer letter and its option's text."""
    block, shown = notes_block([note.with_header() for note in notes]), tuple(choices)
    if answer not in LETTERS or len(shown) != len(LETTERS):
        raise MissingInputError(f"note question {question_id}: answer {answer!r} over {len(shown)} options; "
                                f"expected a letter A-E over five")
    return [EvalTask(TaskView("noteqa", task_id_of(kind), db, question, protocol=protocol, notes=block,
                              choices=shown, qa_format=kind, option_seed=seed),
                     Gold(answer_text=shown[LETTERS.index(answer)], published_answer=answer, protocol=protocol,
                          task_type=kind))
            for kind in FORMATS]


def _dq_tasks(layout: BuildLayout) -> list[EvalTask]:
    return [EvalTask(TaskView("dq", task.task_id, None, task.instruction.read_text(), data_dir=task.data),
                     Gold(dq_task_dir=task.root))
            for task in layout.dq_tasks()]


def _workspace_tasks(layout: BuildLayout, family: str) -> list[EvalTask]:
    return [EvalTask(TaskView(family, task.task_id, None, task.instruction.read_text(encoding="utf-8")),
                     Gold(workspace_task_dir=task.root))
            for task in layout.workspace_tasks_of(family)]
