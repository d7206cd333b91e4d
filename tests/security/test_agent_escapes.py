"""Replays of what agent code did in the hostile test of issue 17 — write into the published build (os.mknod,
os.mkfifo), plant a FIFO named like a results part, signal the evaluator (pidfd_send_signal), read /etc/shadow (spwd),
learn gold files' sizes (os.stat), return gigabytes through SQL — each of which must now fail safely.

Two kinds of test: through the agents' own tools (both layers: bubblewrap and the audit hook), and against the OS
layer alone (bubblewrap.confined_argv running plain Python, no audit hook), because mknod, mkfifo, stat and
pidfd_send_signal are not audited events: only the operating system can stop them.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import duckdb
import pytest

from ehrbench.agents.sandbox import bubblewrap, unavailable_reason
from ehrbench.agents.tools.database import DatabaseTools
from ehrbench.agents.tools.fhir import FhirTools
from ehrbench.llm.tool_chat import ToolCall
from tests.fhir_fakes import write_resources_db

pytestmark = pytest.mark.security

GOLD = "GOLD-ANSWER-7f3a"
SECRET_ENV = "EHRBENCH_TEST_SECRET_KEY"


@pytest.fixture(scope="module", autouse=True)
def bubblewrap_present():
    reason = unavailable_reason()
    assert reason is None, f"the OS sandbox must run where the security suite runs (make sandbox): {reason}"


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """A data folder as a build and an evaluation leave it: agent databases, FHIR resources, questions, hidden gold,
    a results part."""
    root = tmp_path_factory.mktemp("data")
    build = root / "benchmarks" / "20260101T000000Z"
    (build / "db" / "ehrsql2024").mkdir(parents=True)
    with duckdb.connect(str(build / "db" / "ehrsql2024" / "mimic_iv.duckdb")) as con:
        con.execute("create table patients as select range as subject_id, 'F' as gender from range(50)")
    write_resources_db(build / "fhir" / "resources.duckdb", [
        {"resourceType": "Patient", "id": "p1", "gender": "female"},
        {"resourceType": "Observation", "id": "o1", "subject": {"reference": "Patient/p1"}, "status": "final",
         "code": {"coding": [{"system": "http://loinc.org", "code": "718-7"}]}}])
    for folder in ("hidden", "questions"):
        (build / folder).mkdir()
    (build / "hidden" / "gold.csv").write_text(f"task_id,answer\nt1,{GOLD}\n")
    (build / "questions" / "ehrsql.csv").write_text("task_id,question\nt1,How many patients?\n")
    (build / "manifest.json").write_text(json.dumps({"build_id": build.name}))
    part = root / "results" / "run_id=r1" / "part-00000-abcdef12.parquet"
    part.parent.mkdir(parents=True)
    with duckdb.connect() as con:
        con.execute(f"copy (select 'agent' as agent, 1.0 as reward) to '{part}' (format parquet)")
    return root


def fingerprint(root: Path) -> dict[str, tuple]:
    """Every entry under root (special files too) with its type, size and content hash."""
    entries = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            info = path.lstat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(info.st_mode) else None
            entries[str(path.relative_to(root))] = (stat.S_IFMT(info.st_mode), info.st_size, digest)
    return entries


def confined_python(code: str, **view) -> subprocess.CompletedProcess:
    """Plain Python (no audit hook) under the OS sandbox only."""
    argv = bubblewrap.confined_argv([sys.executable, "-I", "-c", textwrap.dedent(code)], view=view)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def attempts(code_by_name: dict[str, str]) -> str:
    """A program that tries each snippet and prints `name: ok` or `name: <error type>`."""
    lines = ["import os, signal, socket", "results = {}"]
    for name, snippet in code_by_name.items():
        lines += ["try:", f"    {snippet}", f"    results[{name!r}] = 'ok'", "except BaseException as exc:",
                  f"    results[{name!r}] = type(exc).__name__"]
    lines.append("import json; print(json.dumps(results))")
    return "\n".join(lines)


def outcome(process: subprocess.CompletedProcess) -> dict[str, str]:
    assert process.returncode == 0, process.stderr
    return json.loads(process.stdout.strip().splitlines()[-1])


# --- the OS layer alone ---------------------------------------------------------------------------------------------

def test_the_os_sandbox_cannot_create_or_change_files_in_the_build_or_results(published: Path):
    build = published / "benchmarks" / "20260101T000000Z"
    before = fingerprint(published)
    part = published / "results" / "run_id=r1" / "part-99999-00000000.parquet"
    tries = {
        "mknod_hidden": f"os.mknod({str(build / 'hidden' / 'planted')!r})",
        "mkfifo_questions": f"os.mkfifo({str(build / 'questions' / 'ehrsql.parquet')!r})",
        "mkfifo_results_part": f"os.mkfifo({str(part)!r})",
        "write_gold": f"open({str(build / 'hidden' / 'gold.csv')!r}, 'w').write('x')",
        "write_view_database": "open('/view/mimic_iv.duckdb', 'r+b').write(b'x')",
        "mknod_view": "os.mknod('/view/planted')",
        "rename_view": "os.rename('/view/mimic_iv.duckdb', '/tmp/moved')",
    }
    result = outcome(confined_python(attempts(tries),
                                     **{"mimic_iv.duckdb": build / "db" / "ehrsql2024" / "mimic_iv.duckdb"}))
    assert all(value != "ok" for value in result.values()), result
    assert fingerprint(published) == before


def test_the_os_sandbox_cannot_signal_or_see_the_evaluator_or_other_processes():
    victim = subprocess.Popen(["sleep", "60"])  # a process of the evaluator's user, as the evaluator is
    try:
        tries = {
            "kill_evaluator": f"os.kill({os.getpid()}, signal.SIGKILL)",
            "kill_victim": f"os.kill({victim.pid}, signal.SIGKILL)",
            "pidfd_evaluator": f"signal.pidfd_send_signal(os.pidfd_open({os.getpid()}), signal.SIGKILL)",
            "pidfd_parent": "signal.pidfd_send_signal(os.pidfd_open(os.getppid()), signal.SIGKILL)",
            "kill_all": "os.kill(-1, signal.SIGKILL)",
            "see_evaluator": f"os.stat('/proc/{os.getpid()}')",
        }
        result = outcome(confined_python(attempts(tries)))
        assert result.pop("kill_all") in ("ok", "PermissionError", "ProcessLookupError")  # -1: only its own
        assert all(value != "ok" for value in result.values()), result
        assert victim.poll() is None, "the sandbox killed a process outside it"
    finally:
        victim.kill()
        victim.wait()


def test_the_os_sandbox_sees_no_secrets_no_gold_and_no_network(published: Path):
    build = published / "benchmarks" / "20260101T000000Z"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    os.environ[SECRET_ENV] = "sk-never-seen"
    try:
        tries = {
            "spwd": "import spwd; assert spwd.getspall()",  # no shadow file in the sandbox: no entries
            "shadow": "open('/etc/shadow').read()",
            "stat_gold": f"os.stat({str(build / 'hidden' / 'gold.csv')!r})",
            "list_build": f"os.listdir({str(build)!r})",
            "home": "os.listdir(os.path.expanduser('~root'))",
            "environment": f"assert os.environ.get({SECRET_ENV!r}) is not None",
            "connect_local": f"socket.create_connection(('127.0.0.1', {port}), timeout=2)",
            "resolve": "socket.getaddrinfo('pypi.org', 443)",
        }
        result = outcome(confined_python(attempts(tries)))
    finally:
        os.environ.pop(SECRET_ENV)
        listener.close()
    assert all(value != "ok" for value in result.values()), result


def test_the_os_sandbox_runs_as_nobody_without_capabilities():
    process = confined_python("""
        import os
        status = dict(line.split(':', 1) for line in open('/proc/self/status'))
        fields = ('CapEff', 'CapBnd', 'NoNewPrivs')
        print(os.getuid(), os.getgid(), *(status[name].strip() for name in fields))
    """)
    assert process.stdout.split() == ["65534", "65534", "0000000000000000", "0000000000000000", "1"], process.stderr


# --- through the agents' tools (both layers) ------------------------------------------------------------------------

def test_agent_python_through_its_tool_leaves_the_published_build_unchanged(published: Path):
    build = published / "benchmarks" / "20260101T000000Z"
    before = fingerprint(published)
    code = attempts({
        "mknod": f"os.mknod({str(build / 'hidden' / 'planted')!r})",
        "mkfifo": f"os.mkfifo({str(published / 'results' / 'run_id=r1' / 'part-00001-ffffffff.parquet')!r})",
        "pidfd": f"signal.pidfd_send_signal(os.pidfd_open({os.getpid()}), signal.SIGKILL)",
        "stat_gold": f"os.stat({str(build / 'hidden' / 'gold.csv')!r})",
        "spwd": "import spwd; spwd.getspall()",
        "read_gold": f"open({str(build / 'hidden' / 'gold.csv')!r}).read()",
    })
    with FhirTools(build / "fhir" / "resources.duckdb") as tools:
        reply = tools.call(ToolCall("1", "execute_python", {"code": code}, "{}"))
    result = json.loads(reply.split("stdout:\n", 1)[1].splitlines()[0])
    assert set(result) == {"mknod", "mkfifo", "pidfd", "stat_gold", "spwd", "read_gold"}
    assert all(value != "ok" for value in result.values()), result
    assert GOLD not in reply
    assert fingerprint(published) == before


@pytest.mark.slow
def test_agent_sql_returning_gigabytes_keeps_the_evaluator_small(published: Path, tmp_path: Path):
    """Tool calls that try to return 10 GB: the evaluator's peak memory must stay under 2 GiB (issue 17). Measured
    in a fresh process by its VmHWM (getrusage's ru_maxrss would carry the forking pytest worker's peak across
    exec)."""
    database = published / "benchmarks" / "20260101T000000Z" / "db" / "ehrsql2024" / "mimic_iv.duckdb"
    script = tmp_path / "evaluator.py"
    script.write_text(textwrap.dedent(f"""
        import json
        from pathlib import Path
        from ehrbench.agents.tools.database import DatabaseTools
        from ehrbench.llm.tool_chat import ToolCall

        replies = {{}}
        with DatabaseTools(Path({str(database)!r}), max_rows=100, timeout_s=60) as tools:
            for name, sql in {{
                    "10gb_in_100_rows": "select repeat('x', 100000000) from range(100)",
                    "10gb_in_2000_rows": "select repeat('x', 5000000) as s from range(2000)",
                    "cells_cut": "select repeat('y', 1000000) as s from range(50)",
            }}.items():
                replies[name] = tools.call(ToolCall("1", "sql_execute", {{"query": sql}}, "{{}}"))
            answer = tools.execute_rows("select repeat('z', 20000) as s from range(10000)")
            replies["answer_rows"] = [answer.row_count_returned, answer.cells_cut, answer.bytes_capped]
            replies["after"] = tools.call(ToolCall("1", "sql_execute", {{"query": "select count(*) from patients"}},
                                                   "{{}}"))
        status = dict(line.split(":", 1) for line in open("/proc/self/status"))
        peak_mib = int(status["VmHWM"].split()[0]) / 1024
        print(json.dumps({{"peak_mib": peak_mib, "replies": replies}}))
    """))
    process = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stderr[-3000:]
    report = json.loads(process.stdout.strip().splitlines()[-1])
    replies = report["replies"]
    assert report["peak_mib"] < 2048, report["peak_mib"]
    assert report["peak_mib"] < 600, f"the evaluator grew to {report['peak_mib']:.0f} MiB on a capped result"
    assert "more memory than the sandbox allows" in replies["10gb_in_100_rows"]
    assert replies["10gb_in_2000_rows"].startswith("Error:") or "fit the result size limit" in replies[
        "10gb_in_2000_rows"]
    assert "50 cell(s) were longer than the cell size limit and are cut" in replies["cells_cut"]
    rows, cut, capped = replies["answer_rows"]
    assert capped and rows < 10_000 and cut == rows  # 8 MB of 10,000-character cells: the size cap, not the rows
    assert "50" in replies["after"]  # the sandbox still answers after its worker ran out of memory


@pytest.mark.slow  # waits out a timeout
def test_a_runaway_query_is_stopped_and_the_next_one_runs(published: Path):
    database = published / "benchmarks" / "20260101T000000Z" / "db" / "ehrsql2024" / "mimic_iv.duckdb"
    with DatabaseTools(database, timeout_s=1) as tools:
        done = threading.Event()
        replies = []

        def ask():
            replies.append(tools.call(ToolCall("1", "sql_execute", {
                "query": "select count(*) from range(1000000000000) a"}, "{}")))
            done.set()

        threading.Thread(target=ask, daemon=True).start()
        assert done.wait(15), "a runaway query was not stopped"
        assert "exceeded 1 s" in replies[0]
        assert "50" in tools.call(ToolCall("1", "sql_execute", {"query": "select count(*) from patients"}, "{}"))
