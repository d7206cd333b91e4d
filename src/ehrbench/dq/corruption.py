"""One task's copy of the audit extract while errors are injected into it, and the labels they leave.

An error is committed as a list of changes, all rows of its cluster: rows whose field was corrupted, rows inserted,
and evidence rows left as they are (the rows that make the error visible, e.g. the prostate diagnosis of a patient
whose sex was flipped). Every row of a committed error is claimed: a later error never mutates it or uses it as
evidence, so each label keeps its meaning."""

from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Literal

import numpy as np
import pandas as pd

from ehrbench.dq.extract import (
    CODE_COLUMN,
    DATE_FORMAT,
    PRECISION,
    ROW_ID,
    TABLE_ORDER,
    TIME_FORMAT,
    Tables,
    sort_rows,
    value_precision,
    with_row_ids,
)

Role = Literal["corrupted", "inserted", "evidence"]


@dataclass(frozen=True)
class Change:
    table: str
    row_id: str
    role: Role
    field: str | None = None
    original_value: str | None = None
    corrupted_value: str | None = None
    row: dict | None = None  # the whole new row, for an inserted one


@dataclass(frozen=True)
class Label:
    table: str
    row_id: str
    cluster_id: str
    family: str
    subtype: str
    role: Role
    field: str | None
    original_value: str | None
    corrupted_value: str | None

    def to_dict(self) -> dict:
        return asdict(self)


class Corruption:
    def __init__(self, tables: Tables, task_id: str) -> None:
        self.tables = {name: frame.copy() for name, frame in tables.items()}
        self.task_id = task_id
        self.labels: list[Label] = []
        self.clusters = 0
        self._claimed: dict[str, set[str]] = {name: set() for name in tables}
        # the same, by position in the table (a numpy mask filters the table without hashing its row ids)
        self._unclaimed = {name: np.ones(len(frame), dtype=bool) for name, frame in tables.items()}
        self._in_scope: dict[tuple[str, frozenset], np.ndarray] = {}  # (table, patients) -> their rows
        self._inserted: dict[str, list[dict]] = {name: [] for name in tables}
        self._precision: dict[str, dict[str, int]] = {}  # table -> code -> decimals

    def available(self, table: str, patients: set[str] | None = None) -> pd.DataFrame:
        """The table's pristine rows not yet part of an error (of the patients in scope, when given)."""
        frame = self.tables[table]
        keep = self._unclaimed[table]
        if patients is not None and "patient_id" in frame.columns:
            key = (table, frozenset(patients))
            if key not in self._in_scope:
                self._in_scope[key] = frame["patient_id"].isin(patients).to_numpy()
            keep = keep & self._in_scope[key]
        return frame[keep]

    def precision(self, table: str, code: str) -> int:
        """Decimals of a code's values in the source (`extract.value_precision`: read with the extract, else worked
        out here before any value of the table is changed)."""
        if table not in self._precision:
            frame = self.tables[table]
            self._precision[table] = frame.attrs.get(PRECISION) or value_precision(frame, CODE_COLUMN[table])
        return int(self._precision[table].get(code, 1))

    def has_row(self, table: str, row_id: str) -> bool:
        """Whether a pristine or inserted row has this id (an inserted row must not repeat one)."""
        return row_id in self.tables[table].index or any(r[ROW_ID] == row_id for r in self._inserted[table])

    def is_claimed(self, table: str, row_id: str) -> bool:
        return row_id in self._claimed[table]

    def new_row(self, table: str, values: dict) -> Change:
        """An inserted row (its id hashed from its own values, as a pristine row's), ready to commit."""
        frame = self.tables[table]
        row = {column: values.get(column) for column in frame.columns if column != ROW_ID}
        identified = with_row_ids(table, pd.DataFrame([row], columns=list(row), dtype=object))
        return Change(table, identified.index[0], "inserted", row=row)

    def commit(self, family: str, subtype: str, changes: list[Change]) -> str:
        """Apply one error's changes and label its cluster; returns the cluster id."""
        for change in changes:
            if change.role != "inserted" and self.is_claimed(change.table, change.row_id):
                raise AssertionError(f"{change.table} row {change.row_id} is already part of an error")
        self.clusters += 1
        cluster_id = f"{self.task_id}-{self.clusters:03d}"
        for change in changes:
            if change.role == "corrupted":
                self.tables[change.table].at[change.row_id, change.field] = change.corrupted_value
                if change.field == "patient_id":
                    self._in_scope = {key: rows for key, rows in self._in_scope.items() if key[0] != change.table}
            if change.role == "inserted":
                self._inserted[change.table].append({ROW_ID: change.row_id, **change.row})
            else:
                self._unclaimed[change.table][self.tables[change.table].index.get_loc(change.row_id)] = False
            self._claimed[change.table].add(change.row_id)
            self.labels.append(Label(change.table, change.row_id, cluster_id, family, subtype, change.role,
                                     change.field, change.original_value, change.corrupted_value))
        return cluster_id

    def result(self) -> Tables:
        """The corrupted tables, inserted rows among their neighbours (the extract's rows are in table order). A
        table with inserted rows is in table order again, also for rows whose sort keys were corrupted."""
        out = {}
        for name, frame in self.tables.items():
            if self._inserted[name]:
                added = pd.DataFrame(self._inserted[name], columns=frame.columns, dtype=object)
                added.index = pd.Index(added[ROW_ID].to_numpy(), dtype=object)
                if frame.index.isin(added.index).any() or added.index.has_duplicates:
                    raise AssertionError(f"{name}: an inserted row has the id of another row")
                keys = set(TABLE_ORDER[name])
                moved = sorted({label.row_id for label in self.labels
                                if label.table == name and label.role == "corrupted" and label.field in keys})
                frame = merge_in_order(name, frame.drop(index=moved), pd.concat([added, frame.loc[moved]]))
            out[name] = frame
        return out


def merge_in_order(table: str, ordered: pd.DataFrame, extra: pd.DataFrame) -> pd.DataFrame:
    """`ordered` (rows in table order) with the few `extra` rows placed where `sort_rows` would put them: each by
    binary search over the ordered rows' sort keys, instead of sorting the whole table again."""
    extra = sort_rows(table, extra)
    columns = [ordered[key].to_numpy() for key in (*TABLE_ORDER[table], ROW_ID)]

    def key_at(position: int) -> tuple:
        return tuple(_sort_key(column[position]) for column in columns)

    extra_keys = [tuple(_sort_key(value) for value in row)
                  for row in extra[[*TABLE_ORDER[table], ROW_ID]].itertuples(index=False, name=None)]
    at = [bisect.bisect_left(range(len(ordered)), key, key=key_at) for key in extra_keys]
    order = np.insert(np.arange(len(ordered)), at, np.arange(len(ordered), len(ordered) + len(extra)))
    return pd.concat([ordered, extra]).iloc[order]


def _sort_key(value: object) -> tuple:
    """A cell as `sort_rows` orders it: a null first, text by code point (as Python compares it)."""
    return (0, "") if value is None or value != value else (1, value)


# --- cell values are text: numbers keep their source precision, times their format ---

def number(value: float, places: int) -> str:
    """`value` rounded to `places` decimals, written as the extract writes numbers (`82.0`, `7.35`)."""
    return f"{round(value, places):.{max(places, 1)}f}"


def moved(text: str, delta: timedelta) -> str:
    fmt = TIME_FORMAT if len(text) > 10 else DATE_FORMAT
    return (datetime.strptime(text, fmt) + delta).strftime(fmt)


def pick(rng: np.random.Generator, frame: pd.DataFrame) -> pd.Series | None:
    """One row of `frame` drawn with `rng`, or None when it is empty."""
    if frame.empty:
        return None
    return frame.iloc[int(rng.integers(len(frame)))]
