"""EHR-ChatQA's database tools as the benchmark publishes them (glee4810/EHR-ChatQA, src/envs/<db>_star/tools/;
docs/benchmarks.md#ehr-chatqa-tools-and-simulated-user): their names, arguments and descriptions, the columns
value_similarity_search indexes in each database, and the texts the tools answer with. `database.DatabaseTools`
runs them; this module only says what they look like.

The published tools run on SQLite and print Python values (`str(rows)`); on a DuckDB database ehrbench prints the
values SQLite would hold (times as text, booleans as 0/1), so an agent reads the same text on either file.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ehrbench.llm.tool_chat import ToolSpec

DEFAULT_K = 100
DEFAULT_TIMEOUT_S = 60  # sql_execute's `timeout` argument, and the agent rules' "finish within 60 seconds"
SAMPLE_ROWS = 3
# the order the published environments list their tools in; web_search, when offered, comes last
TOOL_ORDER = ("table_search", "column_search", "sql_execute", "value_substring_search", "value_similarity_search")

# The columns the published value_similarity_search embeds (src/envs/<db>_star/env.py, `columns_to_retrieve`), in the
# renamed schemas (profile `renamed`); any other column has no values to match.
SIMILARITY_COLUMNS: dict[str, dict[str, tuple[str, ...]]] = {
    "mimic_iv": {"hospitaladmissions": ("admissiontype", "admitsource", "dischargedestination"),
                 "diagnosiscodes": ("description",), "procedurecodes": ("description",),
                 "medicationorders": ("medicationname",), "clinicalitemtypes": ("itemname",),
                 "labtesttypes": ("itemname",),
                 "microbiologyresults": ("specimentype", "testname", "organismname")},
    "eicu": {"allergy_reaction": ("drug_name", "allergy_name"), "condition": ("condition_name",),
             "fluid_balance": ("fluid_label",), "lab": ("lab_name",), "prescription": ("drug_name",),
             "icupatient": ("ethnicity", "hospital_admission_source"), "treatment": ("treatment_name",)},
}

_TABLE = {"type": "string", "description": "The table name."}
_COLUMN = {"type": "string", "description": "The column name."}


def _object(properties: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": properties, "required": required}


SPECS: dict[str, ToolSpec] = {
    "table_search": ToolSpec(
        "table_search", "Get the list of table names in the database.",
        _object({"tool_input": {"type": "string", "description": "An empty string; no input required."}}, [])),
    "column_search": ToolSpec(
        "column_search", "Get the columns of a specific table and its sample rows.",
        _object({"table_names": {"type": "string", "description": "A comma-separated list of table names to "
                                 "retrieve schema and sample rows for."}}, ["table_names"])),
    "sql_execute": ToolSpec(
        "sql_execute", "Execute a SQL query against the database and get back the result. If the query is not "
        "correct, an error message will be returned. The maximum number of results to return is 100.",
        _object({"query": {"type": "string", "description": "A valid SQL query to execute."},
                 "k": {"type": "integer", "description": "The maximum number of results to return. Default is 100."},
                 "timeout": {"type": "integer", "description": "Maximum execution time in seconds before the query "
                             "is terminated. Default is 60 seconds."}}, ["query"])),
    "value_substring_search": ToolSpec(
        "value_substring_search", "Retrieve up to k values from a column that contains the specified substring.",
        _object({"table": _TABLE, "column": _COLUMN,
                 "value": {"type": "string", "description": "The substring to search for."},
                 "k": {"type": "integer", "description": "The maximum number of values to return. Default is 100."}},
                ["table", "column", "value"])),
}


def similarity_spec(columns: Mapping[str, Sequence[str]], embedding: bool) -> ToolSpec:
    """value_similarity_search with its supported columns in the description, as published. The published tool is
    embedding-based; without an embedding model ehrbench ranks by spelling and says so (the only change)."""
    how = "a semantic similarity search (embedding-based)" if embedding else \
        "a lexical similarity search (fuzzy string matching)"
    supported = ", ".join(f"{table}: {list(names)!r}" for table, names in columns.items())
    return ToolSpec(
        "value_similarity_search", f"Perform {how} to find up to k values similar to a given value in a specified "
        f"column. Supported columns: {supported}",
        _object({"table": _TABLE, "column": _COLUMN,
                 "value": {"type": "string", "description": "The value to search for similar matches."},
                 "k": {"type": "integer", "description": "The number of similar values to return. Default is 100."}},
                ["table", "column", "value"]))


# --- the texts the tools answer with ---------------------------------------------------------------------------------

def sqlite_value(value: Any) -> Any:
    """A DuckDB or SQLite cell as SQLite would store it: booleans as 0/1, times and dates as their text, decimals
    as floats; None, numbers, text and bytes as they are."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="microseconds" if value.microsecond else "seconds")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if value is None or isinstance(value, int | float | str | bytes):
        return value
    return str(value)  # UUID, interval, …


def rows_text(rows: Sequence[Sequence[Any]]) -> str:
    """Rows as the published sql_execute prints them: a Python list of tuples, `[(1, 'f'), (2, None)]`."""
    return repr([tuple(sqlite_value(cell) for cell in row) for row in rows])


def values_text(values: Sequence[Any]) -> str:
    """Values as the published value searches print them: a Python list, `['aspirin', 'heparin']`."""
    return repr([sqlite_value(value) for value in values])


@dataclass(frozen=True)
class TableShape:
    """What column_search shows of a table: its columns and constraints, in catalog order."""

    name: str
    columns: tuple[tuple[str, str, bool], ...]  # (name, type, not null)
    primary_key: tuple[str, ...] = ()
    foreign_keys: tuple[tuple[str, str, str], ...] = ()  # (column, referenced table, referenced column)
    unique: tuple[str, ...] = ()


def ddl_text(table: TableShape) -> str:
    """The published column_search's CREATE TABLE: one tab-indented line per column (type upper-cased, INT as
    INTEGER, any TIMESTAMP type as TIMESTAMP, NOT NULL where set), then PRIMARY KEY, FOREIGN KEY and UNIQUE lines."""
    lines = [f"{name} {_type_text(kind)}{' NOT NULL' if not_null else ''}".rstrip()
             for name, kind, not_null in table.columns]
    if table.primary_key:
        lines.append(f"PRIMARY KEY ({', '.join(table.primary_key)})")
    lines += [f"FOREIGN KEY ({column}) REFERENCES {other} ({other_column})"
              for column, other, other_column in table.foreign_keys]
    lines += [f"UNIQUE ({column})" for column in table.unique]
    return f"CREATE TABLE {table.name} (" + ",".join(f"\n\t{line}" for line in lines) + "\n)"


def sample_text(table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The published column_search's sample rows: a comment block, tab-separated, cells as Python prints them."""
    body = "\n".join("\t".join(str(sqlite_value(cell)) for cell in row) for row in rows)
    return f"\n/*\n{SAMPLE_ROWS} rows from {table} table:\n" + "\t".join(columns) + f"\n{body}\n*/"


def _type_text(kind: str) -> str:
    kind = kind.upper()
    if "TIMESTAMP" in kind:
        return "TIMESTAMP"
    # the published code replaces the substring INT, which turns INTEGER into INTEGEREGER; its schema only declares
    # INT, so mapping the word INT is what its agents read
    return "INTEGER" if kind == "INT" else kind
