"""Score a data-quality audit: the rows an auditor flagged against the hidden labels of injected errors.

A cluster is every row of one injected error (the corrupted rows and their evidence); flagging any member catches
it. Cluster recall = caught clusters / clusters; row precision = flagged rows that are labelled / flagged rows;
pass = recall 1.0 and precision >= 0.01 (HealthAgentBench's rule, DESIGN §5.5).

The submission (`flagged_rows.csv`) names rows by table and row id. It is read leniently — header case, a BOM,
`row_id`/`rowid`/`id` for `_row_id`, `table_name`/`file` for `table`, table names with a `.csv`/`.csv.gz` suffix —
and a bad submission never raises: a missing, empty or malformed file scores as flagging nothing, with the reason.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

PASS_RECALL = 1.0
PASS_PRECISION = 0.01
LABEL_COLUMNS = ("table", "row_id", "cluster_id", "family", "subtype", "field", "original_value", "corrupted_value")
_TABLE_ALIASES = ("table", "table_name", "tablename", "file", "file_name")
_ROW_ALIASES = ("_row_id", "row_id", "rowid", "id", "_rowid")


@dataclass
class Submission:
    rows: set[tuple[str, str]]  # (table, row id)
    problem: str | None = None  # why it counts as empty or was partly ignored


@dataclass
class Score:
    recall: float
    precision: float
    f1: float
    passed: bool
    clusters: int
    clusters_caught: int
    flagged_rows: int
    flagged_labelled_rows: int
    recall_by_family: dict[str, float] = field(default_factory=dict)
    recall_by_subtype: dict[str, float] = field(default_factory=dict)
    submission_problem: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def read_labels(task_dir: Path) -> list[dict]:
    """The hidden labels of a task (`gold/labels.parquet`); a missing or incomplete file is an error of the task,
    not of the submission."""
    path = task_dir / "gold" / "labels.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no labels; expected a task folder with gold/labels.parquet")
    table = pq.read_table(path)
    missing = [c for c in LABEL_COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: labels lack column(s) {', '.join(missing)}; expected {', '.join(LABEL_COLUMNS)}")
    return table.to_pylist()


def read_submission(path: Path) -> Submission:
    """The flagged (table, row id) pairs of a submission; never raises."""
    try:
        text = Path(path).read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        return Submission(set(), f"no submission at {path}")
    except (OSError, UnicodeDecodeError) as exc:
        return Submission(set(), f"unreadable submission {path}: {exc}")
    try:
        reader = csv.reader(io.StringIO(text))
        header = [cell.strip().lower() for cell in next(reader, [])]
        table_at = next((header.index(a) for a in _TABLE_ALIASES if a in header), None)
        row_at = next((header.index(a) for a in _ROW_ALIASES if a in header), None)
        if table_at is None or row_at is None:
            return Submission(set(), f"header {header!r} has no table and row id columns; expected 'table,_row_id'")
        rows, skipped = set(), 0
        for record in reader:
            if not any(cell.strip() for cell in record):
                continue
            if len(record) <= max(table_at, row_at):
                skipped += 1
                continue
            table, row = _table_name(record[table_at]), record[row_at].strip().lower()
            if table and row:
                rows.add((table, row))
            else:
                skipped += 1
    except csv.Error as exc:
        return Submission(set(), f"malformed CSV {path}: {exc}")
    return Submission(rows, f"{skipped} line(s) without a table and row id were ignored" if skipped else None)


def _table_name(cell: str) -> str:
    name = Path(cell.strip()).name.lower()
    for suffix in (".csv.gz", ".csv"):
        name = name.removesuffix(suffix)
    return name


def score(labels: list[dict], submission: Submission) -> Score:
    members: dict[str, set[tuple[str, str]]] = defaultdict(set)
    kind: dict[str, tuple[str, str]] = {}
    for label in labels:
        key = (str(label["table"]).lower(), str(label["row_id"]).lower())
        members[label["cluster_id"]].add(key)
        kind.setdefault(label["cluster_id"], (label["family"], f"{label['family']}/{label['subtype']}"))
    labelled = set().union(*members.values()) if members else set()
    caught = {cluster for cluster, rows in members.items() if rows & submission.rows}
    recall = len(caught) / len(members) if members else 1.0
    hits = len(submission.rows & labelled)
    precision = hits / len(submission.rows) if submission.rows else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Score(
        recall=recall, precision=precision, f1=f1, passed=recall >= PASS_RECALL and precision >= PASS_PRECISION,
        clusters=len(members), clusters_caught=len(caught), flagged_rows=len(submission.rows),
        flagged_labelled_rows=hits, recall_by_family=_recall_by(kind, caught, 0),
        recall_by_subtype=_recall_by(kind, caught, 1), submission_problem=submission.problem)


def _recall_by(kind: dict[str, tuple[str, str]], caught: set[str], position: int) -> dict[str, float]:
    totals: dict[str, int] = defaultdict(int)
    hits: dict[str, int] = defaultdict(int)
    for cluster, names in kind.items():
        totals[names[position]] += 1
        hits[names[position]] += cluster in caught
    return {name: hits[name] / totals[name] for name in sorted(totals)}


def score_task(task_dir: Path, flagged_rows: Path) -> Score:
    """The score of a submission file for a task folder (`dq/<task_id>/` with `gold/labels.parquet`)."""
    return score(read_labels(task_dir), read_submission(flagged_rows))
