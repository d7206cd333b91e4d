"""Confinement for what agents run: their SQL on the agent-facing database and their Python over retrieved resources.

Hidden gold files sit next to the databases in a build folder, so neither tool may read other files, write,
reach the network, or run without bounds on time, rows and memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from ehrbench.errors import EhrbenchError

_SQLITE_HEADER = b"SQLite format 3\x00"
_MAX_MESSAGE_CHARS = 2000


class SqlError(EhrbenchError):
    """The agent's SQL failed; the message is the engine's own (without host paths), fit to show the agent."""


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple]
    truncated: bool  # the query had more rows than max_rows
    row_count_returned: int


class SqlSandbox:
    """A read-only connection to one agent-facing database (DuckDB or SQLite, told apart by the file header).

    DuckDB: external access is off (no file readers, ATTACH, COPY, EXPORT, INSTALL/LOAD, secrets or Python
    replacement scans), extensions are never fetched or loaded, spilling to disk is off, and the configuration is
    locked so the agent's SQL cannot SET any of it back. SQLite: opened with mode=ro, ATTACH limited to zero
    databases, and an authorizer that allows reads only. Both: one statement per call, a wall-clock timeout, at most
    max_rows rows returned. SQLite has no per-connection memory cap (its heap limit is process-wide); its
    statements are bounded by the timeout and the string/blob length limit instead.
    """

    def __init__(self, path: str | Path, *, timeout_s: float = 10.0, max_rows: int = 100,
                 memory_limit: str = "1GB", threads: int = 1):
        self.path = Path(path).resolve()
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        self.memory_limit = memory_limit
        self.threads = threads
        self._duckdb: duckdb.DuckDBPyConnection | None = None
        self._sqlite: sqlite3.Connection | None = None
        self._deadline = float("inf")

    def __enter__(self) -> SqlSandbox:
        with self.path.open("rb") as handle:
            header = handle.read(len(_SQLITE_HEADER))
        if header == _SQLITE_HEADER:
            self._sqlite = self._open_sqlite()
        else:
            self._duckdb = self._open_duckdb()
        return self

    def __exit__(self, *exc) -> None:
        if self._duckdb is not None:
            self._duckdb.close()
        if self._sqlite is not None:
            self._sqlite.close()
        self._duckdb = self._sqlite = None

    @property
    def engine(self) -> str:
        return "sqlite" if self._sqlite is not None else "duckdb"

    def execute(self, sql: str) -> QueryResult:
        """Run one statement; failures of the agent's SQL (syntax, permission, timeout) raise SqlError."""
        if self._duckdb is None and self._sqlite is None:
            raise RuntimeError("SqlSandbox is not open; use it as a context manager")
        if not sql.strip():
            raise SqlError("empty query")
        if self._duckdb is not None:
            return self._execute_duckdb(sql)
        return self._execute_sqlite(sql)

    # DuckDB

    def _open_duckdb(self) -> duckdb.DuckDBPyConnection:
        config = {
            "enable_external_access": False,  # files, ATTACH, COPY/EXPORT, INSTALL/LOAD, secrets, replacement scans
            "autoinstall_known_extensions": False,  # never download an extension a query mentions
            "autoload_known_extensions": False,
            "allow_community_extensions": False,
            "allow_unsigned_extensions": False,
            "temp_directory": "",  # no spilling: it would write a .tmp folder next to the database
            "threads": self.threads,
            "memory_limit": self.memory_limit,
            "lock_configuration": True,  # last: the agent's SQL cannot SET any of the above back
        }
        try:
            return duckdb.connect(str(self.path), read_only=True, config=config)
        except duckdb.Error as exc:
            raise SqlError(f"cannot open the database: {self._clean(str(exc))}") from None

    def _execute_duckdb(self, sql: str) -> QueryResult:
        con = self._duckdb
        try:
            statements = con.extract_statements(sql)
        except duckdb.Error as exc:
            raise SqlError(self._clean(str(exc))) from None
        if len(statements) != 1:
            raise self._one_statement_error(len(statements))
        cursor = con.cursor()  # its own result, so an abandoned stream never blocks the next call
        timer = _Deadline(self.timeout_s, cursor.interrupt)
        try:
            cursor.execute(sql)
            columns = [column[0] for column in cursor.description or []]
            rows = cursor.fetchmany(self.max_rows + 1) if cursor.description else []
        except duckdb.Error as exc:
            if timer.fired:
                raise self._timeout_error() from None
            raise SqlError(self._clean(str(exc))) from None
        finally:
            timer.cancel()
            cursor.close()
        return self._result(columns, rows)

    # SQLite

    def _open_sqlite(self) -> sqlite3.Connection:
        try:
            con = sqlite3.connect(self.path.as_uri() + "?mode=ro", uri=True, isolation_level=None,
                                  check_same_thread=False)
        except sqlite3.Error as exc:
            raise SqlError(f"cannot open the database: {self._clean(str(exc))}") from None
        if hasattr(con, "enable_load_extension"):
            con.enable_load_extension(False)
        con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 100_000_000)
        con.set_authorizer(_authorize_sqlite)
        con.set_progress_handler(self._sqlite_past_deadline, 1000)
        return con

    def _sqlite_past_deadline(self) -> int:
        return int(time.monotonic() > self._deadline)

    def _execute_sqlite(self, sql: str) -> QueryResult:
        self._deadline = time.monotonic() + self.timeout_s
        cursor = self._sqlite.cursor()
        try:
            cursor.execute(sql)
            columns = [column[0] for column in cursor.description or []]
            rows = cursor.fetchmany(self.max_rows + 1) if cursor.description else []
        except sqlite3.ProgrammingError as exc:
            if "one statement at a time" in str(exc):
                raise self._one_statement_error(2) from None
            raise SqlError(self._clean(str(exc))) from None
        except sqlite3.Error as exc:
            if time.monotonic() > self._deadline:
                raise self._timeout_error() from None
            raise SqlError(self._clean(str(exc))) from None
        finally:
            self._deadline = float("inf")
            cursor.close()
        return self._result(columns, rows)

    # Shared

    def _result(self, columns: list[str], rows: list[tuple]) -> QueryResult:
        truncated = len(rows) > self.max_rows
        # a cell can hold a host path too (duckdb_databases(), current_setting(...)); only a '/' makes one possible
        rows = [tuple(self._clean(v) if isinstance(v, str) and os.sep in v else v for v in row)
                for row in rows[: self.max_rows]]
        return QueryResult(columns=columns, rows=rows, truncated=truncated, row_count_returned=len(rows))

    def _timeout_error(self) -> SqlError:
        return SqlError(f"query exceeded {self.timeout_s:g} s and was stopped; simplify it or add filters")

    @staticmethod
    def _one_statement_error(count: int) -> SqlError:
        return SqlError(f"one SQL statement per call, got {count}: a second statement could change the session "
                        "(SET, ATTACH) behind a harmless SELECT, so send them as separate calls")

    def _clean(self, text: str) -> str:
        """The engine's words without host paths: they would tell the agent where the build (and its gold) is."""
        for prefix, replacement in ((str(self.path), self.path.name), (str(self.path.parent) + os.sep, ""),
                                    (os.getcwd() + os.sep, ""), (str(Path.home()), "~")):
            text = text.replace(prefix, replacement)
        return text[:_MAX_MESSAGE_CHARS]


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


# Python


@dataclass(frozen=True)
class PythonResult:
    stdout: str
    stderr: str
    exit_status: int | None  # negative: killed by that signal
    timed_out: bool
    killed_reason: str | None


# Third-party packages agent code may import besides the standard library (pure computation, no I/O of their own).
ALLOWED_PACKAGES = frozenset({"numpy", "pandas", "dateutil", "pytz", "tzdata", "six"})

# Standard-library modules that reach files, processes or memory outside Python's audited functions.
_BLOCKED_MODULES = frozenset({
    "ctypes", "_ctypes", "_ctypes_test", "sqlite3", "_sqlite3", "dbm", "_dbm", "_gdbm", "_posixsubprocess",
    "_xxsubinterpreters", "_xxinterpchannels", "_testcapi", "_testinternalcapi", "_testbuffer", "_testmultiphase",
    "_testimportmultiple", "_testclinic", "_xxtestfuzz", "_posixshmem", "_multiprocessing", "syslog", "readline",
    "_curses", "_curses_panel", "_tkinter", "ossaudiodev", "ssl", "_ssl",
})

# Audit events always refused: network, processes, native code, raising limits, reaching the hook's own state.
_DENIED_EVENTS = frozenset({
    "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.gethostbyname",
    "socket.gethostbyaddr", "socket.getnameinfo", "socket.sendto", "socket.sendmsg", "socket.sethostname",
    "subprocess.Popen", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty",
    "os.kill", "os.killpg", "os.chdir", "os.link", "os.symlink", "pty.spawn", "webbrowser.open",
    "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.cdata", "ctypes.cdata/buffer",
    "ctypes.call_function", "ctypes.addressof", "ctypes.string_at", "ctypes.wstring_at",
    "resource.setrlimit", "resource.prlimit", "sys.settrace", "sys.setprofile",
    "cpython.PyEval_SetTrace", "cpython.PyEval_SetProfile", "cpython.PyInterpreterState_New",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "code.__new__", "marshal.load",
    "sqlite3.connect", "sqlite3.connect/handle", "sqlite3.enable_load_extension", "sqlite3.load_extension",
})

_MAX_OPEN_FILES = 64
_MAX_PROCESSES = 16

# Runs in the child before the agent's code. Everything the hooks use is bound as a default argument at definition
# (no global or closure lookups), so agent code cannot patch a module or builtin the check relies on; changing the
# defaults or code of a function is itself an audited event the hook refuses.
_BOOTSTRAP = r'''
import sys


def _confine(config):
    import os, pathlib, posix, resource, stat, sysconfig, types, _posixsubprocess

    work = os.path.realpath(config["work"])
    for name, (soft, hard) in config["limits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))

    def no_processes(*args, **kwargs):
        raise PermissionError("sandbox: starting processes is not allowed")

    _posixsubprocess.fork_exec = no_processes  # the one way to spawn that raises no audit event of its own

    class StrPaths:
        """pathlib passes Path objects to os and io; the hook trusts only plain str paths, so give it those."""

        def __init__(self, module):
            self._module = module

        def __getattr__(self, name):
            value = getattr(self._module, name)
            if not isinstance(value, (types.BuiltinFunctionType, types.FunctionType)):
                return value

            def call(*args, **kwargs):
                return value(*[str(a) if isinstance(a, pathlib.PurePath) else a for a in args], **kwargs)

            return call

    def no_ctypes(name):
        raise AttributeError(f"ctypes.{name}: ctypes is not available in the sandbox")

    stub = types.ModuleType("ctypes", "Stand-in: pandas imports ctypes without using it off Windows.")
    stub.__getattr__ = no_ctypes
    sys.modules["ctypes"] = stub  # a real import of ctypes (or _ctypes) stays refused by the hook

    pathlib.os = StrPaths(os)
    pathlib.io = StrPaths(pathlib.io)

    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sysconfig.get_paths().values()}
    read_roots = tuple(sorted({os.path.realpath(p) for p in prefixes} | {work, "/usr/share/zoneinfo"}))
    write_roots = (work,)
    read_files = frozenset({"/dev/null", "/dev/urandom", "/dev/random", "/dev/zero"})
    write_files = frozenset({"/dev/null"})
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    modules = frozenset((set(sys.stdlib_module_names) | set(config["packages"])) - set(config["blocked"]))
    # (event, indexes of path arguments, indexes of dir_fd arguments); -1 is the default "no dir_fd".
    # Tuples and frozensets only: a denial's traceback shows the hook's locals, which must not be mutable.
    writes = (("os.mkdir", (0,), (2,)), ("os.remove", (0,), (1,)), ("os.rmdir", (0,), (1,)),
              ("os.rename", (0, 1), (2, 3)), ("os.truncate", (0,), ()), ("os.chmod", (0,), (2,)),
              ("os.chown", (0,), (3,)), ("os.utime", (0,), (3,)), ("os.setxattr", (0,), ()),
              ("os.removexattr", (0,), ()), ("os.chflags", (0,), ()), ("os.lchflags", (0,), ()))
    write_events = frozenset(event for event, _, _ in writes)
    # The code of the functions defined here: their defaults hold the policy, so nobody may replace them.
    own_code = frozenset(c for c in sys._getframe().f_code.co_consts if isinstance(c, types.CodeType))
    reads = frozenset({"os.listdir", "os.scandir", "os.getxattr", "os.listxattr", "shutil.copyfile"})

    def resolve(path, _work=work, _lstat=posix.lstat, _readlink=posix.readlink, _islink=stat.S_ISLNK,
                _str=str, _list=list, _reversed=reversed, _errors=(OSError, ValueError)):
        """The absolute path the kernel would reach, symlinks followed; None if they loop."""
        if not _str.startswith(path, "/"):
            path = _work + "/" + path
        pending = _list(_reversed(_str.split(path, "/")))
        parts = []
        hops = 0
        while pending:
            name = pending.pop()
            if name == "" or name == ".":
                continue
            if name == "..":
                if parts:
                    parts.pop()
                continue
            candidate = "/" + "/".join(parts + [name])
            try:
                mode = _lstat(candidate).st_mode
            except _errors:
                parts.append(name)
                continue
            if not _islink(mode):
                parts.append(name)
                continue
            hops += 1
            if hops > 40:
                return None
            target = _readlink(candidate)
            if _str.startswith(target, "/"):
                parts = []
            pending.extend(_reversed(_str.split(target, "/")))
        return "/" + "/".join(parts)

    def allowed(path, write, _resolve=resolve, _type=type, _issubclass=issubclass, _str=str, _bytes=bytes,
                _int=int, _read=read_roots, _write=write_roots, _read_files=read_files, _write_files=write_files):
        """Writes only in the working directory; reads there and in the Python installation."""
        kind = _type(path)
        if kind is _int:
            return True  # a descriptor: its path was checked when it was opened
        if path is None:
            path = "."
        elif _issubclass(kind, _bytes):
            path = _bytes.decode(path, "utf-8", "surrogateescape")
        elif _issubclass(kind, _str):
            path = "" + path  # an exact copy of the characters the kernel will get
        else:
            return False  # another os.PathLike could name one file here and another when the call converts it
        real = _resolve(path)
        if real is None:
            return False
        if real in (_write_files if write else _read_files):
            return True
        for root in (_write if write else _read):
            if real == root or _str.startswith(real, root + "/"):
                return True
        return False

    def hook(event, args, _allowed=allowed, _denied=frozenset(config["denied_events"]), _modules=modules,
             _writes=writes, _write_events=write_events, _reads=reads, _write_flags=write_flags, _type=type,
             _str=str, _int=int, _getattr=getattr, _own_code=own_code, _PermissionError=PermissionError,
             _ModuleNotFoundError=ModuleNotFoundError,
             _guarded_attributes=frozenset({"__code__", "__defaults__", "__kwdefaults__"})):
        if event in _denied:
            raise _PermissionError("sandbox: " + event + " is not allowed")
        if event == "import":
            name = "" + args[0]
            top = _str.partition(name, ".")[0]
            if top not in _modules:
                raise _ModuleNotFoundError("No module named '" + name + "' in the sandbox")
            if args[1] is not None and not _allowed(args[1], False):
                raise _PermissionError("sandbox: native module outside the Python installation: " + name)
        elif event == "open":
            path, mode, flags = args
            write = _type(flags) is _int and _int.__and__(flags, _write_flags) != 0
            if _type(mode) is _str:
                for letter in "wax+":
                    write = write or _str.__contains__(mode, letter)
            if not _allowed(path, write):
                raise _PermissionError("sandbox: no access to " + _str(_type(path).__name__) + " path outside "
                                       "the working directory (use plain str paths inside it)")
        elif event in _reads:
            if not _allowed(args[0], False):
                raise _PermissionError("sandbox: " + event + " outside the working directory")
        elif event in _write_events:
            for name, paths, dir_fds in _writes:
                if name != event:
                    continue
                for index in dir_fds:
                    if args[index] != -1:
                        raise _PermissionError("sandbox: " + event + " with dir_fd is not allowed")
                for index in paths:
                    if not _allowed(args[index], True):
                        raise _PermissionError("sandbox: " + event + " outside the working directory")
        elif (event == "object.__setattr__" and args[1] in _guarded_attributes
              and _getattr(args[0], "__code__", None) in _own_code):
            raise _PermissionError("sandbox: changing the sandbox's own functions is not allowed")

    sys.addaudithook(hook)


def _main():
    import builtins, json, traceback

    config = json.loads(sys.argv[1])
    with open("main.py", encoding="utf-8") as handle:
        code = compile(handle.read(), "main.py", "exec")
    _confine(config)
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(code, namespace)
    except SystemExit:
        raise
    except BaseException as error:
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        sys.exit(1)


_main()
'''


def run_python(code: str, *, inputs: dict[str, str | bytes] | None = None, timeout_s: float = 10,
               memory_mb: int = 512, cpu_s: int = 10, max_output_chars: int = 20000,
               max_file_mb: int = 32) -> PythonResult:
    """Run agent-written Python in a child process confined to a fresh working directory holding `inputs`.

    What confines it:
    - resource limits set in the child before the agent's code runs: address space (memory_mb), CPU time, open
      files, file size (max_file_mb, also bounding stdout/stderr), core dumps off, and a small process count;
    - a wall-clock timeout that kills the child's whole process group;
    - an environment with no variables of the parent (no API keys, no proxies), Python in isolated mode (-I: no
      PYTHON* variables, no user site, the working directory not on sys.path);
    - an audit hook (sys.addaudithook) refusing: sockets (no network), starting processes (subprocess, os.system,
      exec, fork, posix_spawn), signals to other processes, ctypes and other modules that reach memory or files
      unaudited (sqlite3, dbm, subinterpreters, ...), raising resource limits, tracing, gc introspection,
      building code objects, changing a function's code or defaults; reads outside the working directory and the
      Python installation; writes outside the working directory; symlinks, hard links and chdir; imports of
      third-party packages other than ALLOWED_PACKAGES, and native modules from outside the installation.

    What it is not: an audit hook is not a kernel sandbox. It sees only what CPython audits: os.stat/os.path.exists
    are not audited (agent code can learn whether a path exists, not read it); C code of an allowed package that
    opens files itself (numpy, pandas do their file I/O through Python's open) would go unseen; a CPython
    memory-safety bug, or crafted bytecode fed through the import of a written .pyc, could disable the hook. The
    process count limit is per user and does not bind root (fork is refused by the hook regardless). Against a
    deliberately hostile model, run this inside a container or VM without network and without the gold files.
    """
    inputs = inputs or {}
    for name in inputs:
        if Path(name).name != name or name in {".", "..", "main.py"}:
            raise ValueError(f"input name {name!r} must be a plain file name other than main.py")
    mb = 1024 * 1024
    limits = {
        "RLIMIT_AS": (memory_mb * mb, memory_mb * mb),
        "RLIMIT_CPU": (cpu_s, cpu_s + 1),  # SIGXCPU at the soft limit, SIGKILL a second later
        "RLIMIT_NPROC": (_MAX_PROCESSES, _MAX_PROCESSES),
        "RLIMIT_FSIZE": (max_file_mb * mb, max_file_mb * mb),
        "RLIMIT_NOFILE": (_MAX_OPEN_FILES, _MAX_OPEN_FILES),
        "RLIMIT_CORE": (0, 0),
    }
    root = Path(tempfile.mkdtemp(prefix="ehrbench-python-"))
    try:
        work = root / "work"
        work.mkdir()
        for name, content in inputs.items():
            (work / name).write_bytes(content.encode() if isinstance(content, str) else content)
        (work / "main.py").write_text(code, encoding="utf-8")
        config = {"work": str(work), "limits": limits, "packages": sorted(ALLOWED_PACKAGES),
                  "blocked": sorted(_BLOCKED_MODULES), "denied_events": sorted(_DENIED_EVENTS)}
        env = {"PATH": os.defpath, "LANG": "C.UTF-8", "HOME": str(work), "TMPDIR": str(work),
               "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}  # thread pools would hit the process limit
        with (root / "stdout").open("wb") as stdout, (root / "stderr").open("wb") as stderr:
            process = subprocess.Popen([sys.executable, "-I", "-B", "-u", "-c", _BOOTSTRAP, json.dumps(config)],
                                       cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                       start_new_session=True, close_fds=True)
            timed_out = False
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(process)
                process.wait()
        return PythonResult(stdout=_read_output(root / "stdout", max_output_chars, work),
                            stderr=_read_output(root / "stderr", max_output_chars, work),
                            exit_status=process.returncode, timed_out=timed_out,
                            killed_reason=_killed_reason(process.returncode, timed_out, timeout_s))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _killed_reason(status: int | None, timed_out: bool, timeout_s: float) -> str | None:
    if timed_out:
        return f"wall-clock timeout after {timeout_s:g} s"
    if status is None or status >= 0:
        return None
    if -status == signal.SIGXCPU or -status == signal.SIGKILL:
        return f"CPU time limit ({signal.Signals(-status).name})"
    return f"killed by {signal.Signals(-status).name}"


def _read_output(path: Path, max_chars: int, work: Path) -> str:
    with path.open("rb") as handle:
        data = handle.read(max_chars * 4 + 4)
        more = bool(handle.read(1))
    text = data.decode("utf-8", errors="replace").replace(str(work) + os.sep, "").replace(str(work), ".")
    if len(text) > max_chars or more:
        return text[:max_chars] + "\n[output truncated]"
    return text
