"""The renamed database of a build (profile `renamed`), opened read-only: gold SQL rewritten for it, executed on its
DuckDB and SQLite files, and the stored values an agent can find there."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path

import duckdb

from ehrbench.ehrsql.scoring import format_answer
from ehrbench.profiles import BenchmarkDatabase
from ehrbench.questions.chatqa.stored_values import USED_VALUES
from ehrbench.questions.chatqa.suite import RENAMED_PROFILE, TIMEOUT_S

# one implementation of timed execution and of answer cells, shared with the ehrsql suite
from ehrbench.questions.generate import QueryTimeout, plain_cell, run_duckdb, run_sqlite
from ehrbench.questions.templates import PROFILE_OF
from ehrbench.renaming import TABLE_NAME_COLUMNS, SchemaRename, rename_sql
from ehrbench.warehouse import open_duckdb, open_sqlite_read_only


class _RenamedDatabase:
    """One database's renamed DuckDB and SQLite files (and its compatibility DuckDB file), read-only."""

    def __init__(self, database: str, rename: SchemaRename, build_dir: Path):
        self.database, self.rename = database, rename
        self.value_columns = {
            column: rename.table_name_values()
            for column in TABLE_NAME_COLUMNS.get(database, ()) if rename.has_table(column[0])}
        renamed_duckdb, renamed_sqlite = BenchmarkDatabase(RENAMED_PROFILE, database).files(build_dir)
        compat_duckdb, _ = PROFILE_OF[database].benchmark.files(build_dir)
        self.duckdb = open_duckdb(str(renamed_duckdb), read_only=True)
        self.compat = open_duckdb(str(compat_duckdb), read_only=True)
        self.sqlite = open_sqlite_read_only(renamed_sqlite)
        self._values: dict[str, set[str]] = {}

    def close(self) -> None:
        self.duckdb.close()
        self.compat.close()
        self.sqlite.close()

    def renamed(self, sql: str, dialect: str) -> str:
        return rename_sql(sql, self.rename, dialect=dialect, value_columns=self.value_columns)

    def used_values(self, kind: str) -> set[str]:
        """Stored values of `kind` in the event tables of the renamed database (what the agent can find)."""
        if kind not in self._values:
            sql = USED_VALUES[self.database].get(kind)
            rows = self.duckdb.execute(self.renamed(sql, "duckdb")).fetchall() if sql else []
            self._values[kind] = {row[0] for row in rows if row[0] is not None}
        return self._values[kind]

    def run(self, duckdb_sql: str, sqlite_sql: str) -> tuple[list[tuple], str]:
        """Rows of the renamed DuckDB query and the answer string of the renamed SQLite query."""
        rows = [tuple(plain_cell(c) for c in row) for row in run_duckdb(self.duckdb, duckdb_sql, TIMEOUT_S)]
        sqlite_rows = run_sqlite(self.sqlite, sqlite_sql, TIMEOUT_S)
        return rows, format_answer([tuple(plain_cell(c) for c in row) for row in sqlite_rows])


def _open(databases: Iterable[str], renames: Mapping[str, SchemaRename], build_dir: Path) -> dict:
    return {db: _RenamedDatabase(db, renames[f"{RENAMED_PROFILE}/{db}"], build_dir) for db in databases}


_EXECUTION_ERRORS = (duckdb.Error, sqlite3.Error, QueryTimeout)
