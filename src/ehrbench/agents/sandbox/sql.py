"""Agent SQL on an agent-facing database (DuckDB or SQLite), run by a confined worker process (sql_worker.py).

The evaluator never executes agent SQL itself: a worker under bubblewrap sees only the one database file (read-only),
has its own memory limit, and sends back at most max_rows rows and max_bytes of cells (each cell cut at
max_cell_chars). A query that runs past its timeout is interrupted in the worker, and the worker is killed if it does
not answer shortly after. Workers are kept warm per database and given a fresh connection for each SqlSandbox (each
trial), because starting one (Python and DuckDB) costs more than a typical trial's queries.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import selectors
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ehrbench.agents.sandbox import bubblewrap, sql_worker
from ehrbench.errors import EhrbenchError

_SQLITE_HEADER = b"SQLite format 3\x00"
_MAX_MESSAGE_CHARS = 2000
DEFAULT_MAX_CELL_CHARS = 10_000
DEFAULT_MAX_BYTES = 8 * 1024 * 1024  # the most a reply carries: far above what any tool shows, far below a risk
WORKER_MEMORY_MB = 2048  # address space of a worker: DuckDB's 1 GB limit plus the fetched rows and Python
_GRACE_S = 5.0  # how long past its timeout a worker may take to answer before it is killed
_START_TIMEOUT_S = 60.0
_IDLE_WORKERS_PER_DATABASE = 8  # as many as trials in flight on one database, typically
_IDLE_WORKERS = 16  # in all: the oldest idle worker goes first (a data-quality trial's scratch database is never
# asked for again)


class SqlError(EhrbenchError):
    """The agent's SQL failed; the message is the engine's own (without host paths), fit to show the agent."""


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple]
    truncated: bool  # the query had more rows than max_rows
    row_count_returned: int
    cells_cut: int = 0  # cells longer than max_cell_chars, cut
    bytes_capped: bool = False  # the rows stopped at max_bytes

    @property
    def limits_note(self) -> str | None:
        """What the agent must be told about a result the caps changed (None: nothing was cut)."""
        notes = []
        if self.bytes_capped:
            notes.append(f"only the first {self.row_count_returned} rows fit the result size limit")
        if self.cells_cut:
            notes.append(f"{self.cells_cut} cell(s) were longer than the cell size limit and are cut")
        return "; ".join(notes) or None


class SqlSandbox:
    """A read-only session on one agent-facing database, in a confined worker process. Use as a context manager.

    `isolation`: "bubblewrap" (the default; SandboxUnavailable when it cannot run) or "unsafe: ..." (the worker runs
    without the OS sandbox, as bubblewrap.isolation(allow_unsafe=True) returns when the user allowed it).
    """

    def __init__(self, path: str | Path, *, timeout_s: float = 10.0, max_rows: int = 100,
                 memory_limit: str = "1GB", threads: int = 1, max_cell_chars: int = DEFAULT_MAX_CELL_CHARS,
                 max_bytes: int = DEFAULT_MAX_BYTES, isolation: str | None = None):
        self.path = Path(path).resolve()
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        self.max_cell_chars = max_cell_chars
        self.max_bytes = max_bytes
        self.memory_limit = memory_limit
        self.threads = threads
        self.isolation = isolation
        self._worker: _Worker | None = None
        self._engine: str | None = None

    def __enter__(self) -> SqlSandbox:
        self._engine = _engine_of(self.path)
        isolation = self.isolation or bubblewrap.isolation(allow_unsafe=False)
        key = _PoolKey(str(self.path), self._engine, self.memory_limit, self.threads, isolation)
        self._worker = _POOL.take(key)
        try:
            self._worker.request({"op": "open"}, _START_TIMEOUT_S, 4096)
        except SqlError as exc:
            self._discard()
            raise SqlError(f"cannot open the database: {self._clean(str(exc))}") from None
        return self

    def __exit__(self, *exc) -> None:
        worker, self._worker = self._worker, None
        if worker is None:
            return
        try:
            worker.request({"op": "close"}, _START_TIMEOUT_S, 4096)
        except SqlError:
            worker.kill()
            return
        _POOL.give_back(worker)

    @property
    def engine(self) -> str:
        return self._engine or _engine_of(self.path)

    def execute(self, sql: str) -> QueryResult:
        """Run one statement; failures of the agent's SQL (syntax, permission, timeout, memory) raise SqlError."""
        if self._worker is None:
            raise RuntimeError("SqlSandbox is not open; use it as a context manager")
        if not sql.strip():
            raise SqlError("empty query")
        request = {"op": "execute", "sql": sql, "max_rows": self.max_rows, "max_cell_chars": self.max_cell_chars,
                   "max_bytes": self.max_bytes, "timeout_s": self.timeout_s}
        try:
            reply = self._worker.request(request, self.timeout_s + _GRACE_S, self.max_bytes + 64 * 1024 + len(sql))
        except _WorkerGone as gone:
            self._replace_worker()
            if gone.timed_out:
                raise self._timeout_error() from None
            raise SqlError(f"the query stopped the SQL sandbox ({gone}); simplify it") from None
        if not reply.get("ok"):
            if reply.get("kind") == "memory":  # the worker's heap may stay near its limit: start the next query afresh
                self._replace_worker()
            raise self._failure(reply)
        return _result(reply, self._clean)

    # --- errors --------------------------------------------------------------------------------------------------

    def _failure(self, reply: dict) -> SqlError:
        kind, text = reply.get("kind"), str(reply.get("error", ""))
        if kind == "timeout":
            return self._timeout_error()
        if kind == "memory":
            return SqlError(f"the query needs more memory than the sandbox allows ({self.memory_limit} for DuckDB, "
                            f"{WORKER_MEMORY_MB} MB in all); return fewer or smaller rows, or aggregate")
        if kind == "statements":
            return SqlError(f"one SQL statement per call, got {text}: a second statement could change the session "
                            "(SET, ATTACH) behind a harmless SELECT, so send them as separate calls")
        return SqlError(self._clean(text))

    def _timeout_error(self) -> SqlError:
        return SqlError(f"query exceeded {self.timeout_s:g} s and was stopped; simplify it or add filters")

    def _clean(self, text: str) -> str:
        """The engine's words without paths: they would tell the agent where the build (and its gold) is."""
        for prefix, replacement in ((str(self.path), self.path.name), (bubblewrap.VIEW_DIR + "/", ""),
                                    (str(self.path.parent) + os.sep, ""), (os.getcwd() + os.sep, ""),
                                    (str(Path.home()), "~")):
            text = text.replace(prefix, replacement)
        return text[:_MAX_MESSAGE_CHARS]

    def _replace_worker(self) -> None:
        """After a killed worker: a new one with a fresh session, so the trial's next query still runs."""
        self._discard()
        self.__enter__()

    def _discard(self) -> None:
        if self._worker is not None:
            self._worker.kill()
        self._worker = None


def _engine_of(path: Path) -> str:
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise SqlError(f"cannot open the database {path.name}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise SqlError(f"cannot open the database {path.name}: not a regular file")
    with path.open("rb") as handle:
        return "sqlite" if handle.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER else "duckdb"


def _result(reply: dict, clean) -> QueryResult:
    try:
        rows = [tuple(sql_worker.decode_cell(cell) for cell in row) for row in reply["rows"]]
        columns = [str(c) for c in reply["columns"]]
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise SqlError(f"the SQL sandbox sent an unreadable result ({type(exc).__name__})") from None
    # a cell can still name a path inside the sandbox (duckdb_databases(), current_setting(...))
    rows = [tuple(clean(v) if isinstance(v, str) and "/" in v else v for v in row) for row in rows]
    return QueryResult(columns=columns, rows=rows, truncated=bool(reply.get("more_rows")),
                       row_count_returned=len(rows), cells_cut=int(reply.get("cells_cut") or 0),
                       bytes_capped=bool(reply.get("bytes_capped")))


# --- workers -------------------------------------------------------------------------------------------------------

class _WorkerGone(SqlError):
    def __init__(self, message: str, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


@dataclass(frozen=True)
class _PoolKey:
    path: str
    engine: str
    memory_limit: str
    threads: int
    isolation: str


class _Worker:
    """One sql_worker process and its pipes; a request waits at most `timeout_s` and reads at most `limit` bytes."""

    def __init__(self, key: _PoolKey):
        self.key = key
        mb = 1024 * 1024
        config = {"engine": key.engine, "memory_limit": key.memory_limit, "threads": key.threads,
                  "limits": {"RLIMIT_AS": [WORKER_MEMORY_MB * mb] * 2, "RLIMIT_FSIZE": [0, 0],
                             "RLIMIT_CORE": [0, 0], "RLIMIT_NOFILE": [64, 64]}}
        source = _worker_source()
        name = Path(key.path).name  # DuckDB names its catalog after the file: keep the name
        if key.isolation == "bubblewrap":
            config["path"] = f"{bubblewrap.VIEW_DIR}/{name}"
            argv = bubblewrap.confined_argv([sys.executable, "-I", "-B", "-c", source, json.dumps(config)],
                                            view={name: Path(key.path)})
        else:  # unsafe: the user allowed running without the OS sandbox; still a process of its own, with limits
            config["path"] = key.path
            argv = [sys.executable, "-I", "-B", "-c", source, json.dumps(config)]
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                                        env={"PATH": os.defpath, "LANG": "C.UTF-8"})
        os.set_blocking(self.process.stdout.fileno(), False)
        self._buffer = b""

    def request(self, message: dict, timeout_s: float, limit: int) -> dict:
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            self.kill()
            raise _WorkerGone("the worker ended") from None
        line = self._read_line(time.monotonic() + timeout_s, limit)
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError):
            self.kill()
            raise _WorkerGone("unreadable reply") from None
        if not isinstance(reply, dict):
            self.kill()
            raise _WorkerGone("unreadable reply")
        return reply

    def _read_line(self, deadline: float, limit: int) -> bytes:
        fd = self.process.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                if len(self._buffer) > limit:
                    self.kill()
                    raise _WorkerGone(f"a reply over {limit} bytes")
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    self.kill()
                    raise _WorkerGone("no reply in time", timed_out=True)
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    self.kill()
                    raise _WorkerGone(self._ended())
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _ended(self) -> str:
        status = self.process.wait()
        if status < 0:
            return f"killed by {signal.Signals(-status).name}"
        return f"exit status {status}"

    def alive(self) -> bool:
        return self.process.poll() is None and not self._buffer

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        with contextlib.suppress(OSError):
            self.process.stdout.close()


@functools.cache
def _worker_source() -> str:
    """sql_worker.py's text: it runs as `python -c` inside the sandbox, where ehrbench is not installed."""
    return Path(sql_worker.__file__).read_text(encoding="utf-8")


class _Pool:
    """Idle workers, oldest first, handed to one SqlSandbox at a time."""

    def __init__(self):
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    def take(self, key: _PoolKey) -> _Worker:
        with self._lock:
            for worker in reversed(self._idle):
                if worker.key == key:
                    self._idle.remove(worker)
                    break
            else:
                worker = None
        if worker is not None and worker.alive():
            return worker
        if worker is not None:
            worker.kill()
        return _Worker(key)

    def give_back(self, worker: _Worker) -> None:
        retired = []
        with self._lock:
            same = sum(w.key == worker.key for w in self._idle)
            if worker.alive() and same < _IDLE_WORKERS_PER_DATABASE:
                self._idle.append(worker)
            else:
                retired.append(worker)
            while len(self._idle) > _IDLE_WORKERS:
                retired.append(self._idle.pop(0))
        for old in retired:
            old.kill()

    def close(self) -> None:
        with self._lock:
            workers, self._idle = self._idle, []
        for worker in workers:
            worker.kill()


_POOL = _Pool()
atexit.register(_POOL.close)


def close_idle_workers() -> None:
    """Stop the warm workers (tests; a long-lived process that is done evaluating)."""
    _POOL.close()
