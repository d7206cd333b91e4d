"""The pristine audit extract: dbt's `dq__mimic_iv` tables (neutral names, shifted times) read as text, each row
given its id. Every cell is the text the agent-visible CSV holds (None for an empty cell), so that row ids, injected
values and the written files agree without a second formatting step."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ehrbench.dq.row_ids import row_id
from ehrbench.errors import MissingInputError
from ehrbench.warehouse import connect

EXTRACT_SCHEMA = "dq__mimic_iv"
ROW_ID = "_row_id"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
DATE_FORMAT = "%Y-%m-%d"

# The extract's tables in the order they are described to auditors, each with the columns its rows are sorted by
# (inserted rows then sit among their neighbours, not at the end of the file).
TABLE_ORDER: dict[str, tuple[str, ...]] = {
    "patients": ("patient_id",),
    "admissions": ("patient_id", "admit_time", "admission_id"),
    "icu_stays": ("patient_id", "in_time", "stay_id"),
    "diagnoses": ("patient_id", "admission_id", "sequence"),
    "lab_tests": ("test_code",),
    "lab_results": ("patient_id", "charted_at", "test_code"),
    "chart_items": ("item_code",),
    "chart_observations": ("patient_id", "charted_at", "item_code"),
    "medication_orders": ("patient_id", "start_time", "drug"),
}

# The measurement tables and the column naming what was measured.
CODE_COLUMN = {"lab_results": "test_code", "chart_observations": "item_code"}
PRECISION = "value_precision"  # a measurement table's attrs key: code -> decimals of its values in the source

Tables = dict[str, pd.DataFrame]


def read_extract(warehouse: Path) -> Tables:
    """Every extract table as text cells, indexed and led by its row id, in table order. DuckDB computes the cells,
    the ids and the order (the same ids and order `with_row_ids` and `sort_rows` give; a test holds them equal)."""
    tables: Tables = {}
    with connect(warehouse, read_only=True) as con:
        for table in TABLE_ORDER:
            columns = con.execute(
                "select column_name, data_type from information_schema.columns "
                "where table_schema = ? and table_name = ? order by ordinal_position",
                [EXTRACT_SCHEMA, table]).fetchall()
            if not columns:
                raise MissingInputError(f"{warehouse}: no table {EXTRACT_SCHEMA}.{table}; run `dbt build --select dq`")
            arrow = con.execute(_extract_query(table, columns)).to_arrow_table()
            frame = pd.DataFrame({name: shared_strings(arrow.column(name)) for name in arrow.column_names},
                                 dtype=object)
            frame.index = pd.Index(frame[ROW_ID].to_numpy(), dtype=object)
            tables[table] = frame
            if table in CODE_COLUMN:  # a fact of the source, shared by every task's copy (attrs travel with it)
                tables[table].attrs[PRECISION] = value_precision(tables[table], CODE_COLUMN[table])
    return tables


def _extract_query(table: str, columns: list[tuple[str, str]]) -> str:
    """The table's rows as text cells led by their row id (`row_ids.row_id` of the cells; identical rows get their
    occurrence number appended, as `with_row_ids` does), sorted as `sort_rows` sorts."""
    names = [name for name, _ in columns]
    text = ", ".join(_as_text(name, kind) for name, kind in columns)
    hashed = "'" + table + "|' || concat_ws('|', " + ", ".join(f'coalesce("{n}", \'\')' for n in names) + ")"
    quoted = ", ".join(f'"{n}"' for n in names)
    order = ", ".join(f'"{key}" nulls first' for key in TABLE_ORDER[table])
    return (f"with cells as (select {text} from {EXTRACT_SCHEMA}.\"{table}\"), "
            f"numbered as (select *, row_number() over (partition by {quoted}) as occurrence from cells) "
            f"select left(sha1(case when occurrence = 1 then {hashed} else {hashed} || '|' || occurrence end), 16) "
            f"as {ROW_ID}, {quoted} from numbered order by {order}, {ROW_ID}")


def shared_strings(column: pa.ChunkedArray) -> np.ndarray:
    """The column's cells as Python objects (None for a null), one object per distinct value. The extract repeats
    codes, units, flags and times over its rows; a string object per cell made the demo's extract ~70 MiB larger and
    the dq stage's peak 809 MiB instead of 682. Strings are immutable, so sharing them changes no value."""
    encoded = pc.dictionary_encode(column).combine_chunks()
    distinct = np.append(encoded.dictionary.to_numpy(zero_copy_only=False).astype(object), None)
    return distinct[pc.fill_null(encoded.indices, len(encoded.dictionary)).to_numpy()]


def value_precision(frame: pd.DataFrame, code_column: str) -> dict[str, int]:
    """Decimals of each code's values (a heart rate is whole, a creatinine has one decimal; at most 3), so that a
    changed value is written as a real one of its code would be."""
    fraction = frame["value"].dropna().str.partition(".")[2].str.rstrip("0").str.len()
    return fraction.groupby(frame[code_column]).max().clip(upper=3).to_dict()


def _as_text(column: str, kind: str) -> str:
    if kind.startswith("TIMESTAMP"):
        return f"strftime(\"{column}\", '{TIME_FORMAT}') as \"{column}\""
    if kind == "DATE":
        return f"strftime(\"{column}\", '{DATE_FORMAT}') as \"{column}\""
    return f'cast("{column}" as varchar) as "{column}"'


def with_row_ids(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` led by a `_row_id` column (also its index). Identical rows (the source has some) get the occurrence
    number appended to the hashed values, so every id in a table is unique."""
    seen: Counter = Counter()
    ids = []
    for values in frame.itertuples(index=False, name=None):
        seen[values] += 1
        ids.append(row_id(table, values if seen[values] == 1 else (*values, seen[values])))
    frame = frame.copy()
    # object dtype, like the cells: an Arrow-backed string index (pandas' default) is converted to Python strings
    # again each time pandas hashes it, which every boolean mask over the table makes it do
    frame.insert(0, ROW_ID, pd.Series(ids, index=frame.index, dtype=object))
    frame.index = pd.Index(ids, name=None, dtype=object)
    return frame


def sort_rows(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in the table's order (by text, then row id: the same order for the same rows, whatever their history)."""
    keys = [*TABLE_ORDER[table], ROW_ID]
    return frame.sort_values(keys, na_position="first", kind="mergesort")
