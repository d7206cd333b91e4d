"""A DuckDB DBAPI connection that GX's SQL engine can use.

GX reads a result after returning its connection to the pool; the pool's ROLLBACK then runs on the
same DuckDB connection, which discards the pending result (GX sees an empty result and reports
"list index out of range"). Fetching each result at once avoids that; validation queries return
aggregates, so buffering costs nothing.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
from duckdb_engine import ConnectionWrapper, CursorWrapper

from ehrbench.warehouse import open_duckdb


class _BufferedCursor(CursorWrapper):
    def __init__(self, con: duckdb.DuckDBPyConnection, wrapper: ConnectionWrapper) -> None:
        super().__init__(con, wrapper)
        self._con = con
        self._rows: list = []
        self._description = None

    def execute(self, statement, parameters=None, context=None) -> None:
        super().execute(statement, parameters, context)
        self._description = self._con.description
        self._rows = self._con.fetchall() if self._description else []

    @property
    def description(self):
        return self._description

    @property
    def rowcount(self) -> int:
        return len(self._rows)

    def fetchone(self):
        return self._rows.pop(0) if self._rows else None

    def fetchmany(self, size: int | None = None) -> list:
        size = size or 1
        rows, self._rows = self._rows[:size], self._rows[size:]
        return rows

    def fetchall(self) -> list:
        rows, self._rows = self._rows, []
        return rows


class _BufferedConnection(ConnectionWrapper):
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        super().__init__(con)
        self._raw = con

    def cursor(self) -> _BufferedCursor:
        return _BufferedCursor(self._raw, self)


class ReadOnlyConnections:
    """A SQLAlchemy `creator` opening `path` read-only with buffered results and `schema` as default
    schema; `close_all()` closes every connection it made, so that a later writer (dbt) in this process
    can open the file with its own configuration (DuckDB refuses mixed configurations per file)."""

    def __init__(self, path: Path, schema: str) -> None:
        self._path, self._schema = path, schema
        self._opened: list[duckdb.DuckDBPyConnection] = []

    def __call__(self) -> _BufferedConnection:
        con = open_duckdb(str(self._path), read_only=True)
        con.execute(f"set schema = '{self._schema}'")
        self._opened.append(con)
        return _BufferedConnection(con)

    def close_all(self) -> None:
        for con in self._opened:
            con.close()
        self._opened.clear()
