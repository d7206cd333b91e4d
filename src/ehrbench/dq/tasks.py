"""Audit task folders of a build: `dq/<task_id>/` (base variant) and `dq/<task_id>_clues/`, each with the
agent-visible `instruction.md` and `data/<table>.csv.gz`, and the hidden `gold/labels.parquet` and `gold/task.json`.

Files are byte-reproducible (text cells as read, rows in table order, gzip without a timestamp, labels sorted).
After writing, every folder is read back: each label's row must exist and its field hold the corrupted value, and
no agent-visible file may name a source dataset — else the build fails."""

from __future__ import annotations

import csv
import filecmp
import gzip
import io
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ehrbench.dq.corruption import Label
from ehrbench.dq.csv_files import ExtractFiles
from ehrbench.dq.extract import ROW_ID
from ehrbench.dq.inject import InjectedTask
from ehrbench.dq.instructions import FORBIDDEN_NAMES, instruction
from ehrbench.errors import ValidationError
from ehrbench.layout import AuditTaskLayout

VARIANTS = ("base", "clues")
LABEL_SCHEMA = pa.schema([(name, pa.string()) for name in (
    "table", "row_id", "cluster_id", "family", "subtype", "role", "field", "original_value", "corrupted_value")])


@dataclass(frozen=True)
class WrittenTask:
    task_id: str  # the folder name: the recipe's task id, `_clues` appended for that variant
    recipe_id: str
    variant: str
    folder: Path
    families: list[str]
    clusters: int
    labelled_rows: int
    shortfalls: dict[str, int]

    def to_dict(self, root: Path) -> dict:
        return {"task_id": self.task_id, "recipe": self.recipe_id, "variant": self.variant,
                "folder": str(self.folder.relative_to(root)), "families": self.families, "clusters": self.clusters,
                "labelled_rows": self.labelled_rows, "shortfalls": self.shortfalls}


def folder_name(recipe_id: str, variant: str) -> str:
    return recipe_id if variant == "base" else f"{recipe_id}_{variant}"


def write_task(injected: InjectedTask, dq_dir: Path, seed: int, files: ExtractFiles | None = None) -> list[WrittenTask]:
    """Both variants of one injected task; the clues variant copies the base variant's data files. Pass the tasks of
    one extract the same `files`, so that its rows are formatted once."""
    task = injected.task
    files = files or ExtractFiles(injected.extract)
    base = dq_dir / folder_name(task.id, "base")
    if base.exists():
        raise FileExistsError(f"{base}: a task folder of that name exists already")
    AuditTaskLayout(base).data.mkdir(parents=True)
    described = {}
    changed = {table: {label.row_id for label in injected.labels if label.table == table and label.role != "evidence"}
               for table in injected.tables}
    for table, frame in injected.tables.items():
        files.write(table, frame, changed[table], AuditTaskLayout(base).data_file(table))
        described[table] = (len(frame), [c for c in frame.columns if c != ROW_ID])
    clues: dict[str, list[str]] = {}
    for label in injected.labels:
        if label.role != "evidence":
            touched = clues.setdefault(label.subtype, [])
            if label.table not in touched:
                touched.append(label.table)
    written = []
    for variant in VARIANTS:
        folder = dq_dir / folder_name(task.id, variant)
        files = AuditTaskLayout(folder)
        if variant != "base":
            shutil.copytree(AuditTaskLayout(base).data, files.data)
        files.instruction.write_text(
            instruction(task.families, described, {s: sorted(t) for s, t in clues.items()} if variant == "clues"
                        else None))
        files.gold.mkdir()
        _write_labels(injected.labels, files.labels)
        entry = WrittenTask(folder.name, task.id, variant, folder, task.families, injected.clusters,
                            len(injected.labels), injected.shortfalls)
        files.task_json.write_text(json.dumps(
            {**entry.to_dict(dq_dir), "seed": seed, "recipe": task.model_dump()}, indent=2, sort_keys=True) + "\n")
        if variant == "base":
            verify_task(folder, injected.labels)
        else:
            verify_copy(folder, base)
        written.append(entry)
    return written


def _write_labels(labels: list[Label], path: Path) -> None:
    rows = sorted((label.to_dict() for label in labels), key=lambda r: (r["cluster_id"], r["table"], r["row_id"]))
    table = pa.Table.from_pylist(rows, schema=LABEL_SCHEMA)
    pq.write_table(table, path)


def _text_table(content: bytes) -> pa.Table:
    """A written table file's text as a table whose every cell is text ('' for an empty cell)."""
    header = next(csv.reader([content.partition(b"\n")[0].decode()]))
    return pacsv.read_csv(pa.BufferReader(content), convert_options=pacsv.ConvertOptions(
        column_types={column: pa.string() for column in header}, strings_can_be_null=False))


def verify_task(folder: Path, labels: list[Label]) -> None:
    """Read the written folder back: unique row ids, every label's row present with its corrupted value, no
    forbidden name. Raises ValidationError naming the first problems. Each data file is read and decompressed once,
    for its table and for the forbidden names."""
    contents = {path: _visible_content(path) for path in sorted(AuditTaskLayout(folder).data.glob("*"))}
    tables = {path.name.removesuffix(".csv.gz"): _text_table(content)
              for path, content in contents.items() if path.name.endswith(".csv.gz")}
    problems = []
    for name, table in tables.items():
        if pc.count_distinct(table[ROW_ID]).as_py() < table.num_rows:
            ids = table[ROW_ID].to_pandas()
            problems.append(f"{name}: repeated {ROW_ID} {ids[ids.duplicated()].iloc[0]}")
    labelled: dict[str, dict[str, dict]] = {}  # table -> row id -> the written row, for the labelled rows only
    for name in {label.table for label in labels} & set(tables):
        ids = pa.array(sorted({label.row_id for label in labels if label.table == name}), pa.string())
        table = tables[name]
        labelled[name] = {row[ROW_ID]: row for row in table.filter(pc.is_in(table[ROW_ID], value_set=ids)).to_pylist()}
    for label in labels:
        row = labelled.get(label.table, {}).get(label.row_id)
        if row is None:
            problems.append(f"{label.cluster_id}: {label.table} has no row {label.row_id}")
            continue
        written = row[label.field] if label.role != "evidence" else None
        if label.role != "evidence" and written != (label.corrupted_value or ""):
            problems.append(f"{label.cluster_id}: {label.table} row {label.row_id} {label.field} is {written!r}, "
                            f"expected {label.corrupted_value!r}")
    problems += forbidden_names(folder, data=False)
    problems += [found for path, content in contents.items() for found in _names_in(folder, path, content)]
    if problems:
        raise ValidationError(f"{folder}: {len(problems)} problem(s) in the written audit task: "
                              + "; ".join(problems[:5]))


def verify_copy(folder: Path, base: Path) -> None:
    """A variant folder holds the base variant's data files byte for byte, and names no source dataset."""
    problems = [f"data/{path.name} differs from {base.name}'s" for path in sorted(AuditTaskLayout(base).data.glob("*"))
                if not filecmp.cmp(path, AuditTaskLayout(folder).data / path.name, shallow=False)]
    problems += forbidden_names(folder, data=False)
    if problems:
        raise ValidationError(f"{folder}: {len(problems)} problem(s) in the written audit task: "
                              + "; ".join(problems[:5]))


def forbidden_names(folder: Path, data: bool = True) -> list[str]:
    """Agent-visible places (paths, instruction, headers and cells) that name a source dataset or project."""
    files = AuditTaskLayout(folder)
    visible = [files.instruction, *(sorted(files.data.glob("*")) if data else [])]
    return [found for path in visible for found in _names_in(folder, path, _visible_content(path))]


def _visible_content(path: Path) -> bytes | None:
    """A file's text as an agent reads it (a .gz file decompressed); None when there is no such file."""
    if not path.is_file():
        return None
    raw = path.read_bytes()
    return gzip.decompress(raw) if path.name.endswith(".gz") else raw


def _names_in(folder: Path, path: Path, content: bytes | None) -> list[str]:
    text = path.relative_to(folder.parent.parent).as_posix().encode()
    if content is not None:
        text += b"\n" + content
    lowered = text.lower()  # bytes: ASCII case folding, enough for these ASCII names
    return [f"{path.relative_to(folder)} names {name!r}" for name in FORBIDDEN_NAMES if name.encode() in lowered]


def write_oracle(folder: Path, path: Path) -> Path:
    """The gold submission of a task (every labelled row): it must pass."""
    labels = pq.read_table(AuditTaskLayout(folder).labels, columns=["table", "row_id"]).to_pylist()
    buffer = io.StringIO()
    buffer.write("table,_row_id\n")
    for pair in sorted({(label["table"], label["row_id"]) for label in labels}):
        buffer.write(",".join(pair) + "\n")
    path.write_text(buffer.getvalue())
    return path

