"""The agent sandbox's in-process layers: each limit is shown by an escape attempt that must fail and leave the files
untouched. Agent Python runs here under the audit hook alone (the --unsafe-sandbox mode), so that each test pins the
hook itself; tests/security replays the escapes the hook cannot see against the OS sandbox (bubblewrap)."""

from __future__ import annotations

import dis
import hashlib
import socket
import sqlite3
import textwrap
import time
from functools import partial
from pathlib import Path

import duckdb
import pytest

from ehrbench.agents.sandbox import SqlError, SqlSandbox
from ehrbench.agents.sandbox import run_python as confined_python
from ehrbench.agents.sandbox.audit_hook import BOOTSTRAP as _BOOTSTRAP

run_python = partial(confined_python, isolation="unsafe: the audit hook alone")

ROWS = 250


@pytest.fixture
def build(tmp_path: Path) -> Path:
    """A build folder: the agent databases with the hidden gold files next to them."""
    folder = tmp_path / "build"
    folder.mkdir()
    con = duckdb.connect(str(folder / "agent.duckdb"))
    con.execute(f"create table patients as select range as id, 'p' || range as name from range({ROWS})")
    con.execute(f"copy (select 'GOLD-ANSWER' as answer) to '{folder / 'secret.parquet'}' (format parquet)")
    con.close()
    lite = sqlite3.connect(folder / "agent.sqlite")
    lite.execute("create table patients (id integer, name text)")
    lite.executemany("insert into patients values (?, ?)", [(i, f"p{i}") for i in range(ROWS)])
    lite.commit()
    lite.close()
    (folder / "gold.csv").write_text("question,answer\nq1,GOLD-ANSWER\n")
    return folder


def snapshot(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(params=["duckdb", "sqlite"])
def database(request, build: Path) -> Path:
    return build / f"agent.{request.param}"


def test_select_works_and_is_capped_at_max_rows(database: Path):
    with SqlSandbox(database, max_rows=100) as sandbox:
        capped = sandbox.execute("select id, name from patients order by id")
        small = sandbox.execute("select id from patients where id < 5 order by id")
    assert capped.columns == ["id", "name"]
    assert capped.row_count_returned == len(capped.rows) == 100 and capped.truncated
    assert capped.rows[0] == (0, "p0")
    assert small.rows == [(i,) for i in range(5)] and not small.truncated


DUCKDB_ESCAPES = [
    "select * from read_csv('{gold}')",
    "select * from '{gold}'",
    "select * from read_text('{gold}')",
    "select * from read_parquet('{secret}')",
    "select * from glob('{folder}/*')",
    "attach '{folder}/new.duckdb' as other",
    "copy (select 1) to '{folder}/out.csv'",
    "export database '{folder}/dump'",
    "install httpfs",
    "load httpfs",
    "set enable_external_access = true",
    "set lock_configuration = false",
    "set memory_limit = '100GB'",
    "create table t (i int)",
    "insert into patients values (1, 'x')",
    "drop table patients",
    "select 1; attach '{folder}/new.duckdb' as other",
]
SQLITE_ESCAPES = [
    "attach database '{folder}/new.sqlite' as other",
    "create table t (i int)",
    "insert into patients values (1, 'x')",
    "update patients set name = 'x'",
    "drop table patients",
    "pragma journal_mode = wal",
    "pragma writable_schema = on",
    "select load_extension('{folder}/evil')",
    "select 1; attach database '{folder}/new.sqlite' as other",
]


@pytest.mark.parametrize("engine, escape", [("duckdb", e) for e in DUCKDB_ESCAPES]
                         + [("sqlite", e) for e in SQLITE_ESCAPES])
def test_escapes_fail_and_leave_the_build_untouched(build: Path, engine: str, escape: str):
    before = snapshot(build)
    sql = escape.format(gold=build / "gold.csv", secret=build / "secret.parquet", folder=build)
    with SqlSandbox(build / f"agent.{engine}") as sandbox:
        with pytest.raises(SqlError) as error:
            sandbox.execute(sql)
        assert sandbox.execute("select count(*) from patients").rows == [(ROWS,)]  # still usable, unchanged
    assert str(build) not in str(error.value)  # no host paths for the agent
    assert snapshot(build) == before


@pytest.mark.parametrize("engine", ["duckdb", "sqlite"])
def test_chained_statements_are_rejected_with_the_reason(build: Path, engine: str):
    with SqlSandbox(build / f"agent.{engine}") as sandbox, pytest.raises(SqlError, match="one SQL statement"):
        sandbox.execute("select 1; select 2")


def test_duckdb_does_not_scan_python_objects_of_the_caller(build: Path):
    secret_frame = duckdb.sql("select 'GOLD-ANSWER' as answer").arrow()  # noqa: F841 (found by name, if allowed)
    with SqlSandbox(build / "agent.duckdb") as sandbox, pytest.raises(SqlError):
        sandbox.execute("select * from secret_frame")


def test_syntax_errors_become_sql_errors(database: Path):
    with SqlSandbox(database) as sandbox, pytest.raises(SqlError, match="(?i)syntax"):
        sandbox.execute("selec id from patients")


@pytest.mark.parametrize("engine, sql", [
    ("duckdb", "select count(*) from range(100000000000)"),
    ("sqlite", "with recursive c(n) as (select 1 union all select n + 1 from c where n < 10000000000) "
               "select count(*) from c"),
])
@pytest.mark.slow  # waits out a timeout
def test_long_queries_stop_at_the_timeout(build: Path, engine: str, sql: str):
    with SqlSandbox(build / f"agent.{engine}", timeout_s=1) as sandbox:
        start = time.monotonic()
        with pytest.raises(SqlError, match="exceeded 1 s"):
            sandbox.execute(sql)
        assert time.monotonic() - start < 1 + 2
        assert sandbox.execute("select 1").rows == [(1,)]  # the next call is not interrupted


# Python


def test_python_prints_and_reads_its_inputs():
    result = run_python("import json\nprint(json.load(open('patient.json'))['id'])",
                        inputs={"patient.json": '{"id": "p1"}'})
    assert (result.stdout, result.exit_status, result.timed_out) == ("p1\n", 0, False)


def test_pathlib_works_inside_the_working_directory():
    result = run_python("from pathlib import Path\nPath('out.txt').write_text('ok')\n"
                        "print(Path('out.txt').read_text(), sorted(p.name for p in Path('.').iterdir()))")
    assert result.stdout == "ok ['main.py', 'out.txt']\n", result.stderr


def test_python_cannot_read_the_gold_file(build: Path):
    for code in [f"print(open({str(build / 'gold.csv')!r}).read())",
                 f"import os\nprint(os.listdir({str(build)!r}))",
                 f"import os\nos.symlink({str(build / 'gold.csv')!r}, 'link')\nprint(open('link').read())",
                 f"print(open('/proc/self/root{build / 'gold.csv'}').read())"]:
        result = run_python(code)
        assert "GOLD-ANSWER" not in result.stdout and "gold.csv" not in result.stdout
        assert "PermissionError" in result.stderr, code


def test_a_pathlike_cannot_name_one_file_for_the_check_and_another_for_the_open(build: Path):
    code = f"""
        import itertools
        names = itertools.cycle(['main.py', {str(build / 'gold.csv')!r}])
        class Shifty:
            def __fspath__(self):
                return next(names)
        print(open(Shifty()).read())
    """
    result = run_python(textwrap.dedent(code))
    assert "GOLD-ANSWER" not in result.stdout


def test_agent_code_cannot_loosen_the_hook_it_finds_in_a_traceback(build: Path):
    code = f"""
        try:
            open({str(build / 'gold.csv')!r})
        except PermissionError as error:
            tb = error.__traceback__
            while tb.tb_next:
                tb = tb.tb_next
            checker = tb.tb_frame.f_locals['_allowed']
        checker.__defaults__ = tuple(('/',) if isinstance(d, tuple) else d for d in checker.__defaults__)
    """
    result = run_python(textwrap.dedent(code))
    assert result.exit_status == 1 and "sandbox's own functions" in result.stderr


def test_the_hook_looks_up_no_global_or_closure_name():
    """Agent code can patch modules and builtins, so the hook must not read any of them at call time."""
    module = compile(_BOOTSTRAP, "<bootstrap>", "exec")
    confine = next(c for c in module.co_consts if getattr(c, "co_name", "") == "_confine")
    checks = [c for c in confine.co_consts if getattr(c, "co_name", "") in {"resolve", "allowed", "hook"}]
    assert len(checks) == 3
    for code in checks:
        lookups = {i.opname for i in dis.get_instructions(code)} & {"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF"}
        assert not lookups, code.co_name


def test_python_cannot_write_outside_its_working_directory(tmp_path: Path):
    target = tmp_path / "written.txt"
    result = run_python(f"open({str(target)!r}, 'w').write('x')")
    assert "PermissionError" in result.stderr and not target.exists()


def test_python_has_no_network():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        result = run_python(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('in')")
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    assert result.stdout == "" and "PermissionError" in result.stderr


@pytest.mark.parametrize("code", [
    "import subprocess\nsubprocess.run(['touch', {marker!r}])",
    "import os\nos.system('touch {marker}')",
    "import os\nos.execv('/usr/bin/touch', ['touch', {marker!r}])",
    "import _posixsubprocess\n_posixsubprocess.fork_exec()",
])
def test_python_cannot_start_processes(tmp_path: Path, code: str):
    marker = tmp_path / "ran"
    result = run_python(code.format(marker=str(marker)))
    assert "PermissionError" in result.stderr and not marker.exists()


def test_a_fork_bomb_is_contained_and_the_process_limit_is_set():
    start = time.monotonic()
    bomb = run_python("import os\nwhile True:\n    os.fork()", timeout_s=5)
    assert time.monotonic() - start < 5 and not bomb.timed_out
    assert "PermissionError: sandbox: os.fork" in bomb.stderr
    limit = run_python("import resource\nprint(resource.getrlimit(resource.RLIMIT_NPROC))")
    assert limit.stdout == "(16, 16)\n"
    raised = run_python("import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))")
    assert "PermissionError" in raised.stderr


def test_big_allocations_fail_with_memory_error():
    result = run_python("data = bytearray(2 * 1024**3)", memory_mb=512)
    assert result.exit_status == 1 and "MemoryError" in result.stderr


@pytest.mark.slow  # waits out a timeout
def test_an_infinite_loop_is_killed_at_the_timeout():
    start = time.monotonic()
    result = run_python("while True:\n    pass", timeout_s=1)
    assert time.monotonic() - start < 1 + 2
    assert result.timed_out and result.killed_reason == "wall-clock timeout after 1 s"


@pytest.mark.slow  # waits out a timeout
def test_cpu_time_is_limited():
    result = run_python("while True:\n    pass", timeout_s=10, cpu_s=1)
    assert not result.timed_out and result.killed_reason.startswith("CPU time limit")


def test_the_parent_environment_is_not_visible(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    result = run_python("import os\nprint(sorted(os.environ))")
    assert "OPENAI_API_KEY" not in result.stdout and "HTTPS_PROXY" not in result.stdout
    assert "sk-secret" not in result.stdout


def test_output_is_truncated():
    result = run_python("print('x' * 100000)\nimport sys\nprint('y' * 100000, file=sys.stderr)", max_output_chars=1000)
    assert result.stdout.startswith("x" * 1000) and len(result.stdout) < 1100
    assert result.stdout.endswith("[output truncated]") and len(result.stderr) < 1100


def test_blocked_modules_cannot_be_imported():
    for module in ["ctypes.util", "_ctypes", "sqlite3", "duckdb", "ssl"]:
        result = run_python(f"import {module}")
        assert "ModuleNotFoundError" in result.stderr, module
