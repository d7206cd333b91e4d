"""Score a data-quality audit: the rows an auditor flagged against the hidden labels of injected errors.

A cluster is every row of one injected error (the corrupted rows and their evidence); flagging any member catches
it. Cluster recall = caught clusters / clusters; row precision = flagged rows that are labelled / flagged rows;
pass = recall 1.0 and precision >= 0.01 (HealthAgentBench's rule, docs/benchmarks.md#data-quality-audit-score).

The submission (`flagged_rows.csv`) names rows by table and row id. It is read leniently — header case, a BOM,
`row_id`/`rowid`/`id` for `_row_id`, `table_name`/`file` for `table`, table names with a `.csv`/`.csv.gz` suffix —
and a bad submission never raises: a missing, empty or malformed file scores as flagging nothing, with the reason.
A file that is not a regular file (a FIFO would block the reader for ever) or larger than MAX_SUBMISSION_BYTES is
refused before it is opened (`submission_refusal`).
"""

from __future__ import annotations

import csv
import io
import os
import stat
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import pyarrow.parquet as pq

from ehrbench.errors import ConfigError, MissingInputError
from ehrbench.layout import AuditTaskLayout

PASS_RECALL = 1.0
PASS_PRECISION = 0.01
LABEL_COLUMNS = ("table", "row_id", "cluster_id", "family", "subtype", "field", "original_value", "corrupted_value")
_TABLE_ALIASES = ("table", "table_name", "tablename", "file", "file_name")
_ROW_ALIASES = ("_row_id", "row_id", "rowid", "id", "_rowid")
# A submission line is `<table>,<16 hex digits>` (about 35 bytes). Flagging every row of the 100-patient extract is
# 8.4 MB (254,000 rows of the MIMIC-IV demo, whose patients all have ICU stays and so more rows than most); 64 MiB is
# 7 times that. Past it, reading took minutes and gigabytes (300 MB: 220 s, 4.5 GB).
MAX_SUBMISSION_BYTES = 64 * 2**20
_FILE_KINDS = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket",
               stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device"}


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
    path = AuditTaskLayout(task_dir).labels
    if not path.is_file():
        raise MissingInputError(f"{path}: no labels; expected a task folder with gold/labels.parquet")
    table = pq.read_table(path)
    missing = [c for c in LABEL_COLUMNS if c not in table.column_names]
    if missing:
        raise ConfigError(f"{path}: labels lack column(s) {', '.join(missing)}; expected {', '.join(LABEL_COLUMNS)}")
    return table.to_pylist()


def submission_refusal(path: Path) -> str | None:
    """Why a submission is refused unopened, in one line naming the file (None: it may be read). Only the file's
    status is looked at: a FIFO is never opened (opening it for reading would wait for a writer)."""
    try:
        info = os.stat(path)
    except OSError:
        return None  # missing or unreadable: read_submission says which
    return _refusal(path, info)


def _refusal(path: Path, info: os.stat_result) -> str | None:
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _FILE_KINDS.items() if test(info.st_mode)), "not a regular file")
        return f"refused submission {path}: it is {kind}, not a regular file (flagged_rows.csv)"
    if info.st_size > MAX_SUBMISSION_BYTES:
        return (f"refused submission {path}: {_mib(info.st_size)} is over the {_mib(MAX_SUBMISSION_BYTES)} limit "
                "(flagging every row of a task's extract takes about 8 MiB)")
    return None


def _mib(size: int) -> str:
    return f"{size / 2**20:,.1f} MiB"


def _read_bounded(path: Path) -> bytes:
    """The bytes of a regular file of at most MAX_SUBMISSION_BYTES. Opened without blocking and checked again on
    the open file, so a FIFO or a bigger file swapped in after submission_refusal looked is still refused."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        refusal = _refusal(path, os.fstat(fd))
        if refusal:
            raise _Refused(refusal)
        data = handle.read(MAX_SUBMISSION_BYTES + 1)
    if len(data) > MAX_SUBMISSION_BYTES:  # grew since fstat
        raise _Refused(f"refused submission {path}: over the {_mib(MAX_SUBMISSION_BYTES)} limit")
    return data


class _Refused(Exception):
    pass


def read_submission(path: Path) -> Submission:
    """The flagged (table, row id) pairs of a submission; never raises. A refused file (submission_refusal) scores
    as empty with the refusal as its problem."""
    refusal = submission_refusal(path)
    if refusal:
        return Submission(set(), refusal)
    try:
        data = _read_bounded(Path(path))
    except FileNotFoundError:
        return Submission(set(), f"no submission at {path}")
    except _Refused as exc:
        return Submission(set(), str(exc))
    except OSError as exc:
        return Submission(set(), f"unreadable submission {path}: {exc}")
    # decoded as it is read: no second, decoded copy of the file in memory
    text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig", newline="")
    try:
        return _parse_submission(csv.reader(text))
    except UnicodeDecodeError as exc:
        return Submission(set(), f"unreadable submission {path}: {exc}")
    except csv.Error as exc:
        return Submission(set(), f"malformed CSV {path}: {exc}")


def _parse_submission(reader) -> Submission:
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
    return Submission(rows, f"{skipped} line(s) without a table and row id were ignored" if skipped else None)


@lru_cache(maxsize=1024)  # a submission names a few tables a million times: one string each, not a million
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
