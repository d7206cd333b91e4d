"""Importing a published task file as a task set, in two steps:

1. `plan_import`: read and check everything a user gives — the format, the name, the build, the files (every task,
   every field) — and refuse with one line (ConfigError, MissingInputError) before anything runs or is written;
2. `run_import`: execute every answerable task's gold SQL on its target database of the build (a query that fails
   stops the import, naming the file and the task), compare the answer with the published one where the format
   compares on this build (the reproduction report), and write the task set atomically (ehrbench.tasksets.store).

The gold answer of a task is the build's: what its gold SQL returns on the database the agent will query; a format
without gold SQL gives the published answer's rows (FHIR-AgentBench)."""

from __future__ import annotations

import importlib.metadata
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from ehrbench.ehrsql.scoring import format_answer
from ehrbench.errors import ConfigError
from ehrbench.layout import DataLayout, TaskSetLayout
from ehrbench.noteqa.records import DischargeNote
from ehrbench.noteqa.suite import NOTE_SCHEMA, note_row
from ehrbench.settings import TASKSET_NAME_FORM
from ehrbench.tasksets.execution import SqliteDatabase
from ehrbench.tasksets.formats import BuildInfo, TaskFormat
from ehrbench.tasksets.model import (
    IdCoverage,
    ImportedTask,
    Mismatch,
    Reproduction,
    SourceFile,
    Target,
    TaskSetManifest,
    is_name,
)
from ehrbench.tasksets.reading import source_file, unique
from ehrbench.tasksets.registry import format_named
from ehrbench.tasksets.store import write_taskset
from ehrbench.warehouse import open_duckdb


@dataclass
class ImportPlan:
    """A checked import: nothing has run yet."""

    fmt: TaskFormat
    layout: TaskSetLayout
    build: BuildInfo
    tasks: list[ImportedTask]
    sources: list[SourceFile]
    replace: bool = False
    warnings: list[str] = field(default_factory=list)
    notes: list[DischargeNote] = field(default_factory=list)  # what a note-QA format's questions are asked over

    @property
    def targets(self) -> list[Target]:
        return sorted({self.fmt.target(task) for task in self.tasks}, key=str)

    @property
    def executed_on(self) -> list[Target]:
        """The targets whose database runs gold SQL (a format without gold SQL has its published answers only)."""
        return sorted({self.fmt.target(task) for task in self.tasks if task.gold_sql is not None}, key=str)


def plan_import(data: DataLayout, format_name: str, paths: Sequence[Path], name: str | None = None,
                build: str = "latest", replace: bool = False, notes: Path | None = None) -> ImportPlan:
    fmt = format_named(format_name)
    if not paths:
        raise ConfigError("PATH: expected the published file(s) or folder to import")
    if fmt.needs_notes and notes is None:
        raise ConfigError(f"--notes: format {fmt.name} asks its questions over notes; expected MIMIC-IV-Note's "
                          f"folder (note/discharge.csv.gz)")
    if notes is not None and not fmt.needs_notes:
        raise ConfigError(f"--notes: format {fmt.name} asks over no notes; leave --notes out")
    name = name or fmt.default_name(paths)
    if not is_name(name):
        raise ConfigError(f"--name: expected {TASKSET_NAME_FORM}, got {name!r}")
    layout = data.taskset(name)
    if layout.root.exists() and not replace:
        raise ConfigError(f"--name: task set {name!r} exists ({layout.root}); give another --name or --replace")
    folder = data.build_folder(build)
    if not folder.is_dir():
        raise ConfigError(f"--build: no build at {folder}; expected 'latest', a build id or a build folder "
                          "(list builds with 'ehrbench builds')")
    info = BuildInfo.load(folder)
    warnings = fmt.check_build(info)
    tasks = fmt.read([Path(p) for p in paths])
    if not tasks:
        raise ConfigError(f"{', '.join(map(str, paths))}: no tasks; expected at least one")
    by_file = {Path(p).name: Path(p) for p in _files(paths)}
    unique([(task.source_id, by_file.get(task.source_file, Path(task.source_file))) for task in tasks])
    sources = [source_file(p) for p in _files(paths)]
    asked: list[DischargeNote] = []
    if notes is not None:
        notes_file, tasks, asked = fmt.read_notes(tasks, Path(notes))
        sources.append(source_file(notes_file))
    plan = ImportPlan(fmt, layout, info, tasks, sources, replace, warnings, asked)
    for target in plan.executed_on:
        if not info.database(target).is_file():
            raise ConfigError(f"--build: build {info.build_id} has no {info.database(target)}; expected the "
                              f"{target} database its tasks run on")
    return plan


def run_import(plan: ImportPlan) -> TaskSetManifest:
    """Execute, compare and write (see the module's docstring)."""
    fmt, build = plan.fmt, plan.build
    note = fmt.not_compared(build)
    report = Reproduction(note=note)
    rows: list[dict] = []
    databases = {target: SqliteDatabase(build.database(target)) for target in plan.executed_on}
    now = {target: fmt.current_time(build, target) for target in plan.targets}
    files = {Path(source.path).name: source.path for source in plan.sources}
    try:
        for task in plan.tasks:
            target = fmt.target(task)
            executed = task.is_answerable and task.gold_sql is not None
            if executed:
                answer = _executed(fmt, task, databases[target], now[target], files)
            elif task.is_answerable and task.answer_rows is not None:  # no gold SQL: the published answer is the gold
                answer = [list(row) for row in task.answer_rows]
            else:
                answer = None
            reproduced = None
            if executed:
                report.executed += 1
                if task.published_answer is not None and note is None:
                    reproduced = fmt.agrees(answer, task.published_answer)
                    report.compared += 1
                    report.reproduced += reproduced
                    if not reproduced:
                        report.mismatches.append(Mismatch(task_id=task.source_id, published=task.published_answer,
                                                          reproduced=fmt.answer_form(answer)))
            rows.append(_row(plan, task, target, now[target], answer, reproduced))
    finally:
        for database in databases.values():
            database.close()
    resources = fmt.fhir_resources(build)
    if resources and any(task.fhir_ids for task in plan.tasks) and resources.is_file():
        report.fhir_ids = _fhir_id_coverage(resources, plan.tasks)
    manifest = TaskSetManifest(
        name=plan.layout.name, format=fmt.name, protocol=fmt.protocol, suite=fmt.suite, created_at=datetime.now(UTC),
        sources=plan.sources, build=build.ref(), targets=[str(t) for t in plan.targets], requires=fmt.requires(),
        current_time={str(t): n for t, n in now.items() if n}, tasks=len(plan.tasks),
        answerable=sum(t.is_answerable for t in plan.tasks), reproduction=report, warnings=plan.warnings,
        ehrbench_version=_version())
    notes = pa.Table.from_pylist([note_row(note) for note in plan.notes], schema=NOTE_SCHEMA) if plan.notes else None
    write_taskset(plan.layout, manifest, rows, replace=plan.replace, notes=notes)
    return manifest


def _fhir_id_coverage(resources: Path, tasks: Sequence[ImportedTask]) -> dict[str, IdCoverage]:
    """Per resource type, the distinct gold ids of the tasks and how many of them the FHIR view holds."""
    pairs = sorted({pair for task in tasks  # a format that gives no types: ids of any type
                    for pair in zip(task.fhir_types or ("any type",) * len(task.fhir_ids), task.fhir_ids, strict=True)})
    with open_duckdb(str(resources), read_only=True) as con:
        # joined on the id alone (a hash join; an OR in the join condition made it a nested loop: 16 s on 500k)
        counts = con.execute(
            "select wanted.resource_type, count(*), count(*) filter (where r.resource_type = wanted.resource_type "
            "or (r.id is not null and wanted.resource_type = 'any type')) "
            "from (select unnest(?) as resource_type, unnest(?) as id) as wanted "
            "left join (select distinct id, resource_type from resources) as r on r.id = wanted.id "
            "group by 1 order by 1", [[t for t, _ in pairs], [i for _, i in pairs]]).fetchall()
    return {kind: IdCoverage(published=published, found=found) for kind, published, found in counts}


def _executed(fmt: TaskFormat, task: ImportedTask, database: SqliteDatabase, now: str | None,
              files: dict[str, str]) -> list[list]:
    try:
        return database.rows(fmt.prepare_sql(task.gold_sql or "", now))
    except sqlite3.Error as exc:
        file = files.get(task.source_file, task.source_file)
        raise ConfigError(f"{file}: task {task.source_id}: its gold SQL fails on {database.path} "
                          f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no message'})") from None


def _row(plan: ImportPlan, task: ImportedTask, target: Target, now: str | None, answer: list[list] | None,
         reproduced: bool | None) -> dict:
    extra = {key: value for key, value in (("task_type", task.task_type), ("patient_fhir_id", task.patient_fhir_id),
                                           ("fhir_types", list(task.fhir_types))) if value} | dict(task.extra)
    return {"question_id": task.source_id, "suite": plan.fmt.suite, "db": task.db, "template_id": task.template,
            "is_answerable": task.is_answerable, "question": task.question,
            "context": task.context or (f"Assume the current time is {now}." if now else None),
            "current_time": now, "gold_sql_sqlite": task.gold_sql,
            "answer": json.dumps(answer, default=str) if answer is not None else None,
            # without gold SQL (a format with answers only) the published answer is the gold
            "answer_text": format_answer(answer) if answer is not None else (
                task.published_answer if task.is_answerable else None),
            "answer_rows": len(answer) if answer is not None else None,
            "empty_answer": not answer if answer is not None else None, "fhir_ids": list(task.fhir_ids),
            "extra": json.dumps(extra), "taskset": plan.layout.name, "protocol": plan.fmt.protocol,
            "target": str(target), "source_file": task.source_file, "published_answer": task.published_answer,
            "reproduced": reproduced}


def _files(paths: Sequence[Path]) -> list[Path]:
    """The files an import reads (a folder: its JSON files), for their checksums."""
    files: list[Path] = []
    for path in map(Path, paths):
        files += sorted(p for p in path.glob("*.json") if p.is_file()) if path.is_dir() else [path]
    return files


def _version() -> str | None:
    try:
        return importlib.metadata.version("ehrbench")
    except importlib.metadata.PackageNotFoundError:
        return None
