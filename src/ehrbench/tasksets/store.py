"""Task sets on disk (`tasksets/<name>/` of the data directory, ehrbench.layout.TaskSetLayout): written whole into a
hidden staging folder and renamed into place, so a reader never sees half a task set and a failed import leaves
nothing; read back as their manifest and tasks.

`tasks.parquet` holds the columns of a build's `questions/questions.parquet` that a task has (question_id — the
published id —, suite, db, template_id, is_answerable, question, context, current_time, gold SQL, answer, answer_text,
…; `gold_sql_sqlite` is the published SQL, `gold_sql_duckdb` is null: the published benchmarks run SQLite), then the
task set's own: taskset, protocol, target, source_file, published_answer, reproduced."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from ehrbench.errors import ConfigError, MissingInputError
from ehrbench.layout import DataLayout, TaskSetLayout
from ehrbench.tasksets.model import TaskSetManifest

TASKS_SCHEMA = pa.schema([
    ("question_id", pa.string()), ("suite", pa.string()), ("db", pa.string()), ("template_id", pa.string()),
    ("category", pa.string()), ("is_answerable", pa.bool_()), ("question", pa.string()), ("context", pa.string()),
    ("current_time", pa.string()), ("gold_sql_duckdb", pa.string()), ("gold_sql_sqlite", pa.string()),
    ("answer", pa.string()),  # the gold rows on the build, JSON
    ("answer_text", pa.string()),  # the same as EHRSQL-2024's answer string (ehrbench.tasks.Gold.answer_text)
    ("answer_rows", pa.int64()), ("empty_answer", pa.bool_()), ("fhir_ids", pa.list_(pa.string())),
    ("extra", pa.string()),  # JSON: task_type, patient_fhir_id
    ("taskset", pa.string()), ("protocol", pa.string()),
    ("target", pa.string()),  # <profile>/<database> of the build
    ("source_file", pa.string()), ("published_answer", pa.string()),
    ("reproduced", pa.bool_()),  # the build's answer is the published one; null: not compared
])


def write_taskset(layout: TaskSetLayout, manifest: TaskSetManifest, rows: list[dict], *,
                  replace: bool = False, notes: pa.Table | None = None) -> Path:
    """Write `rows` and `manifest` as the task set `layout.name`, atomically: into `.<name>.<hex>.tmp/` beside it,
    then renamed into place. With `replace`, an existing task set of that name is swapped out and removed."""
    final = layout.root
    if final.exists() and not replace:
        raise ConfigError(f"task set {layout.name!r} exists ({final}); give another --name or --replace")
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = final.with_name(f".{layout.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        staging.mkdir()
        written = TaskSetLayout(staging)
        pq.write_table(pa.Table.from_pylist([{c: row.get(c) for c in TASKS_SCHEMA.names} for row in rows],
                                            schema=TASKS_SCHEMA), written.tasks)
        if notes is not None:
            pq.write_table(notes, written.notes)
        _write_durably(written.manifest, manifest.model_dump_json(indent=2))
        if final.exists():  # --replace: the old one moves aside first, then goes
            old = final.with_name(f".{layout.name}.{uuid.uuid4().hex[:8]}.old")
            os.rename(final, old)
            os.rename(staging, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


def read_manifest(layout: TaskSetLayout) -> TaskSetManifest:
    path = layout.manifest
    if not path.is_file():
        raise MissingInputError(f"task set {layout.name!r}: no {path}; import it with 'ehrbench tasks import' "
                                f"(list them with 'ehrbench tasks list')")
    try:
        return TaskSetManifest.model_validate_json(path.read_text())
    except ValidationError as exc:
        raise ConfigError(f"{path}: not a task set manifest ({exc.errors()[0]['msg']})") from None


def read_tasks(layout: TaskSetLayout) -> list[dict]:
    if not layout.tasks.is_file():
        raise MissingInputError(f"task set {layout.name!r}: no {layout.tasks}; import it again")
    return pq.read_table(layout.tasks).to_pylist()


def list_tasksets(data: DataLayout) -> list[tuple[TaskSetLayout, TaskSetManifest | str]]:
    """Every task set folder by name with its manifest, or why it cannot be read (staging folders are left out)."""
    if not data.tasksets.is_dir():
        return []
    found: list[tuple[TaskSetLayout, TaskSetManifest | str]] = []
    for folder in sorted(data.tasksets.iterdir()):
        if folder.name.startswith(".") or not folder.is_dir() or folder.is_symlink():
            continue
        layout = TaskSetLayout(folder)
        try:
            found.append((layout, read_manifest(layout)))
        except (ConfigError, MissingInputError) as exc:
            found.append((layout, str(exc)))
    return found


def _write_durably(path: Path, text: str) -> None:
    with path.open("w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
