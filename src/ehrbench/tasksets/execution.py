"""Gold SQL — and another harness's predicted SQL (`ehrbench tasks score`) — run on a build's SQLite database, as the
published scorers run it: Python's sqlite3, undecodable text bytes dropped (`text_factory`), a time limit per query.
Unlike theirs, the file is opened read-only and an authorizer allows reading only (no ATTACH, no PRAGMA, no
load_extension): a prediction file is input from elsewhere."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import TracebackType

from ehrbench.errors import MissingInputError
from ehrbench.statement_deadline import interrupted_after
from ehrbench.warehouse import open_sqlite_read_only

TIMEOUT_S = 60.0  # EHRSQL's scorer gives a query 60 s


class QueryTimeout(sqlite3.OperationalError):
    pass


def _reads_only(action: int, arg1: str | None, arg2: str | None, _database: str | None, _trigger: str | None) -> int:
    if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE):
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY if (arg2 or "").lower() == "load_extension" else sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


class SqliteDatabase:
    """One read-only connection; `rows(sql)` raises sqlite3.Error (QueryTimeout past `timeout_s`)."""

    def __init__(self, path: Path, timeout_s: float = TIMEOUT_S) -> None:
        if not Path(path).is_file():
            raise MissingInputError(f"{path}: no such database; expected a build with this database's .sqlite file")
        self.path = Path(path)
        self.timeout_s = timeout_s
        self._con = open_sqlite_read_only(self.path, check_same_thread=False)
        self._con.text_factory = lambda raw: raw.decode(errors="ignore")
        self._con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        self._con.set_authorizer(_reads_only)

    def rows(self, sql: str) -> list[list]:
        with interrupted_after(self.timeout_s, self._con.interrupt) as deadline:  # as the questions' gold queries
            try:
                return [list(row) for row in self._con.execute(sql).fetchall()]
            except sqlite3.OperationalError:
                if deadline.fired:
                    raise QueryTimeout(f"ran longer than {self.timeout_s:g} s") from None
                raise

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> SqliteDatabase:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
