"""The process that runs agent SQL, started confined by sql.py (bubblewrap.py) with one agent-facing database bound
read-only; it sees nothing else of the build.

It reads one JSON request per line on stdin and answers one JSON line on stdout:
- {"op": "open"}: a fresh read-only connection (a new session for each trial: nothing one trial's SQL sets, creates
  or caches is seen by the next);
- {"op": "execute", "sql": ..., "max_rows": ..., "max_cell_chars": ..., "max_bytes": ..., "timeout_s": ...}: one
  statement; rows are fetched in small batches and the reply stops at max_rows rows or max_bytes of encoded cells,
  a cell longer than max_cell_chars is cut — so a query returning gigabytes never crosses to the evaluator;
- {"op": "close"}.
Replies: {"ok": true, "columns", "rows", "more_rows", "cells_cut", "bytes_capped"} or {"ok": false, "error",
"kind"}. Cell values travel as JSON with tags for the types JSON lacks (encode_cell / decode_cell), never pickled:
the evaluator must not run what a confined process sends.

Standard library and duckdb only: this file runs inside the sandbox, where ehrbench is not installed.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import sqlite3
import sys
import threading
import time
import uuid

FETCH_BATCH = 64
_SQLITE_HEADER = b"SQLite format 3\x00"


# --- cell values as JSON -------------------------------------------------------------------------------------------

def encode_cell(value, max_chars: int) -> tuple[object, bool]:
    """A JSON-able form of a DuckDB/SQLite value, and whether it was cut to max_chars."""
    if value is None or isinstance(value, (bool, int)):
        return value, False
    if isinstance(value, float):
        return (value, False) if math.isfinite(value) else ({"$f": repr(value)}, False)
    if isinstance(value, str):
        return (value, False) if len(value) <= max_chars else (value[:max_chars], True)
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        cut = len(data) > max_chars
        return {"$b": base64.b64encode(data[:max_chars]).decode()}, cut
    if isinstance(value, decimal.Decimal):
        return {"$d": str(value)}, False
    if isinstance(value, datetime.datetime):
        return {"$dt": value.isoformat()}, False
    if isinstance(value, datetime.date):
        return {"$date": value.isoformat()}, False
    if isinstance(value, datetime.time):
        return {"$t": value.isoformat()}, False
    if isinstance(value, datetime.timedelta):
        return {"$td": [value.days, value.seconds, value.microseconds]}, False
    if isinstance(value, uuid.UUID):
        return {"$u": str(value)}, False
    if isinstance(value, (list, tuple, dict)):
        text = json.dumps(_nested(value), separators=(",", ":"))
        if len(text) > max_chars:  # a nested value too big to show whole: its text, cut
            return text[:max_chars], True
        return {"$j": text}, False
    text = str(value)
    return text[:max_chars], len(text) > max_chars


def _nested(value):
    if isinstance(value, dict):
        return {"$m": [[_nested(k), _nested(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [_nested(v) for v in value]
    return encode_cell(value, sys.maxsize)[0]


def decode_cell(value):
    """The Python value encode_cell stood for (in the evaluator: plain JSON in, only these types out)."""
    if not isinstance(value, dict):
        if isinstance(value, list):
            return [decode_cell(v) for v in value]
        return value
    if len(value) != 1:
        raise ValueError("a tagged cell holds one tag")
    ((tag, payload),) = value.items()
    decoders = {
        "$f": float, "$d": decimal.Decimal, "$dt": datetime.datetime.fromisoformat,
        "$date": datetime.date.fromisoformat, "$t": datetime.time.fromisoformat, "$u": uuid.UUID,
        "$b": base64.b64decode, "$td": lambda p: datetime.timedelta(days=p[0], seconds=p[1], microseconds=p[2]),
        "$j": lambda p: decode_cell(json.loads(p)),
        "$m": lambda p: {_hashable(decode_cell(k)): decode_cell(v) for k, v in p},
    }
    if tag not in decoders:
        raise ValueError(f"unknown cell tag {tag!r}")
    return decoders[tag](payload)


def _hashable(value):
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


# --- the connection ------------------------------------------------------------------------------------------------

class _Deadline:
    """Calls interrupt once timeout_s has passed (DuckDB has no statement timeout of its own)."""

    def __init__(self, timeout_s: float, interrupt):
        self.fired = False
        self._interrupt = interrupt
        self._timer = threading.Timer(timeout_s, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        self._interrupt()

    def cancel(self) -> None:
        self._timer.cancel()


class QueryFailed(Exception):
    def __init__(self, message: str, kind: str = "sql"):
        super().__init__(message)
        self.kind = kind  # sql | timeout | memory | statements


# Pragmas that only describe the schema; the table name is their argument.
_SQLITE_SCHEMA_PRAGMAS = frozenset({"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo",
                                    "foreign_key_list", "table_list"})
# Pragmas that are reads when given no value (with a value they would change the connection).
_SQLITE_READ_PRAGMAS = frozenset({"database_list", "collation_list", "function_list", "pragma_list",
                                  "user_version", "schema_version", "encoding", "page_size", "page_count"})


def _authorize_sqlite(action: int, arg1, arg2, db_name, trigger) -> int:
    """Reads only: no writes, DDL, ATTACH/DETACH, transactions, setting pragmas or load_extension()."""
    if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE):
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY if (arg2 or "").lower() == "load_extension" else sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA:
        name = (arg1 or "").lower()
        if name in _SQLITE_SCHEMA_PRAGMAS or (name in _SQLITE_READ_PRAGMAS and arg2 is None):
            return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


class Connection:
    """One read-only session on the database: DuckDB with external access off and its configuration locked, or
    SQLite read-only (immutable) with an authorizer that allows reads only."""

    def __init__(self, path: str, engine: str, memory_limit: str, threads: int):
        self.path, self.engine = path, engine
        self._deadline = float("inf")
        if engine == "duckdb":
            import duckdb  # only the DuckDB worker pays for the import

            self._errors = (duckdb.Error,)
            self._memory_errors = (duckdb.OutOfMemoryException,)
            self.con = duckdb.connect(path, read_only=True, config={
                "enable_external_access": False,  # files, ATTACH, COPY/EXPORT, INSTALL/LOAD, secrets, scans
                "autoinstall_known_extensions": False,  # never download an extension a query mentions
                "autoload_known_extensions": False,
                "allow_community_extensions": False,
                "allow_unsigned_extensions": False,
                "temp_directory": "",  # no spilling to disk
                "threads": threads,
                "memory_limit": memory_limit,
                "lock_configuration": True,  # last: the agent's SQL cannot SET any of the above back
            })
        else:
            self._errors = (sqlite3.Error,)
            self._memory_errors = ()
            uri = "file:" + path + "?mode=ro&immutable=1"
            self.con = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            if hasattr(self.con, "enable_load_extension"):
                self.con.enable_load_extension(False)
            self.con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
            self.con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 100_000_000)
            self.con.set_authorizer(_authorize_sqlite)
            self.con.set_progress_handler(lambda: int(time.monotonic() > self._deadline), 1000)

    def close(self) -> None:
        self.con.close()

    def execute(self, request: dict) -> dict:
        sql, timeout_s = request["sql"], float(request["timeout_s"])
        if self.engine == "duckdb":
            try:
                count = len(self.con.extract_statements(sql))
            except self._errors as exc:
                raise QueryFailed(str(exc)) from None
            if count != 1:
                raise QueryFailed(str(count), "statements")
            cursor = self.con.cursor()  # its own result, so an abandoned stream never blocks the next call
            timer = _Deadline(timeout_s, cursor.interrupt)
        else:
            cursor = self.con.cursor()
            self._deadline = time.monotonic() + timeout_s
            timer = None
        try:
            cursor.execute(sql)
            columns = [column[0] for column in cursor.description or []]
            return _fetch(cursor, columns, request) if cursor.description else _reply(columns, [], False, 0, False)
        except self._memory_errors:
            raise QueryFailed("", "memory") from None
        except MemoryError:
            raise QueryFailed("", "memory") from None
        except sqlite3.ProgrammingError as exc:
            if "one statement at a time" in str(exc):
                raise QueryFailed("2", "statements") from None
            raise QueryFailed(str(exc)) from None
        except self._errors as exc:
            if (timer is not None and timer.fired) or time.monotonic() > self._deadline:
                raise QueryFailed("", "timeout") from None
            raise QueryFailed(str(exc)) from None
        finally:
            if timer is not None:
                timer.cancel()
            self._deadline = float("inf")
            cursor.close()


def _fetch(cursor, columns: list[str], request: dict) -> dict:
    """Rows in batches until max_rows (one more tells there are more) or max_bytes of encoded cells."""
    max_rows, max_chars, max_bytes = int(request["max_rows"]), int(request["max_cell_chars"]), int(request["max_bytes"])
    rows, size, cut_cells, more_rows, capped = [], 0, 0, False, False
    while not (more_rows or capped):
        batch = cursor.fetchmany(FETCH_BATCH)
        if not batch:
            break
        for row in batch:
            if len(rows) == max_rows:
                more_rows = True
                break
            encoded, row_cuts = [], 0
            for value in row:
                cell, cut = encode_cell(value, max_chars)
                row_cuts += cut
                encoded.append(cell)
            row_size = len(json.dumps(encoded, separators=(",", ":")))
            if size + row_size > max_bytes:
                capped = True
                break
            size += row_size
            cut_cells += row_cuts
            rows.append(encoded)
    return _reply(columns, rows, more_rows, cut_cells, capped)


def _reply(columns, rows, more_rows, cut_cells, capped) -> dict:
    return {"ok": True, "columns": columns, "rows": rows, "more_rows": more_rows, "cells_cut": cut_cells,
            "bytes_capped": capped}


def _set_limits(limits: dict) -> None:
    import resource

    for name, (soft, hard) in limits.items():
        resource.setrlimit(getattr(resource, name), (soft, hard))


def serve(config: dict, requests, replies) -> None:
    connection = None
    for line in requests:
        try:
            request = json.loads(line)
            op = request["op"]
            if op == "open":
                if connection is not None:
                    connection.close()
                connection = Connection(config["path"], config["engine"], config["memory_limit"], config["threads"])
                reply = {"ok": True}
            elif op == "close":
                if connection is not None:
                    connection.close()
                connection = None
                reply = {"ok": True}
            else:
                reply = connection.execute(request)
        except QueryFailed as failure:
            reply = {"ok": False, "kind": failure.kind, "error": str(failure)[:4000]}
        except Exception as exc:  # noqa: BLE001 - any failure is the agent's query's, reported, and the worker goes on
            reply = {"ok": False, "kind": "sql", "error": f"{type(exc).__name__}: {exc}"[:4000]}
        replies.write(json.dumps(reply, separators=(",", ":")) + "\n")
        replies.flush()


if __name__ == "__main__":
    _config = json.loads(sys.argv[1])
    _set_limits(_config["limits"])
    serve(_config, sys.stdin, sys.stdout)
