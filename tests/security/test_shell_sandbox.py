"""A terminal agent's shell commands (run_shell, for workspace tasks): they work in their workspace, which keeps what
they write, and reach nothing else — not the build beside it, not the network, not the evaluator's secrets or
processes — within their time, memory and output bounds."""

from __future__ import annotations

import hashlib
import os
import socket
import time
from pathlib import Path

import pytest

from ehrbench.agents.sandbox import run_shell, unavailable_reason

pytestmark = pytest.mark.security

SECRET_ENV = "EHRBENCH_TEST_SHELL_SECRET"


@pytest.fixture(scope="module", autouse=True)
def bubblewrap_present():
    reason = unavailable_reason()
    assert reason is None, f"the OS sandbox must run where the security suite runs (make sandbox): {reason}"


@pytest.fixture
def task(tmp_path) -> dict[str, Path]:
    """A task folder as a build leaves it: the agent's workspace with its input, hidden gold beside it."""
    workspace = tmp_path / "task" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "input.csv").write_text("subject_id,code\n1,LAB\n")
    gold = tmp_path / "task" / "gold"
    gold.mkdir()
    (gold / "labels.csv").write_text("subject_id,label\n1,GOLD-7f3a\n")
    return {"workspace": workspace, "gold": gold}


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_commands_work_in_the_workspace_which_keeps_what_they_write(task):
    workspace = task["workspace"]
    first = run_shell("pwd; cat input.csv; mkdir -p out && python -c \"import duckdb; "
                      "duckdb.sql(\\\"copy (select 42 as x) to 'out/x.parquet'\\\")\"", workspace)
    assert first.exit_status == 0, first.stderr
    assert first.stdout.splitlines()[:2] == ["/workspace", "subject_id,code"]
    second = run_shell("python -c \"import pyarrow.parquet as pq; print(pq.read_table('out/x.parquet')"
                       ".column('x').to_pylist())\"", workspace)
    assert second.stdout.strip() == "[42]", second.stderr
    # the files are the evaluator's again once the command ends (it can clean them up)
    assert all(p.stat().st_uid == os.geteuid() for p in [workspace, *workspace.rglob("*")])


def test_nothing_beside_the_workspace_is_visible_or_writable(task):
    before = _digest(task["gold"])
    gold = task["gold"] / "labels.csv"
    result = run_shell(f"cat {gold}; ls {task['gold']}; echo x > {gold}; cat /etc/shadow; ls ~root; "
                       f"touch /usr/planted; ls ..", task["workspace"])
    assert "GOLD-7f3a" not in result.stdout + result.stderr
    assert "labels.csv" not in result.stdout
    assert _digest(task["gold"]) == before
    assert not Path("/usr/planted").exists()


def test_no_network_no_secrets_no_other_processes_and_no_privileges(task):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    os.environ[SECRET_ENV] = "sk-never-seen"
    try:
        result = run_shell(
            f"python -c \"import socket; socket.create_connection(('127.0.0.1', {listener.getsockname()[1]}), "
            f"timeout=2)\" && echo CONNECTED; env; id -u; ls /proc | grep -c '^[0-9]'; "
            "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status", task["workspace"])
    finally:
        os.environ.pop(SECRET_ENV)
        listener.close()
    assert "CONNECTED" not in result.stdout and "sk-never-seen" not in result.stdout
    lines = result.stdout.splitlines()
    assert "65534" in lines
    assert "CapEff:\t0000000000000000" in lines and "NoNewPrivs:\t1" in lines
    processes = int(lines[lines.index("65534") + 1])
    assert processes <= 5  # the sandbox's own: its pid namespace shows nothing of the evaluator


def test_time_memory_and_output_are_bounded_and_the_next_command_runs(task):
    started = time.monotonic()
    slow = run_shell("sleep 30 & sleep 30", task["workspace"], timeout_s=1)
    assert slow.timed_out and slow.killed_reason == "wall-clock timeout after 1 s"
    assert time.monotonic() - started < 10
    greedy = run_shell("python -c \"x = bytearray(3 * 1024**3)\"", task["workspace"], memory_mb=512)
    assert greedy.exit_status != 0 and "MemoryError" in greedy.stderr
    loud = run_shell("yes | head -c 200000", task["workspace"], max_output_chars=1000)
    assert loud.stdout.endswith("[output truncated]") and len(loud.stdout) < 1100
    assert run_shell("echo still here", task["workspace"]).stdout == "still here\n"


def test_without_bubblewrap_the_command_runs_in_the_workspace_itself_when_unsafe_is_asked(task):
    result = run_shell("pwd; echo made > made.txt", task["workspace"], isolation="unsafe: test")
    assert result.stdout.strip() == "."  # the workspace's host path, which outputs never show
    assert (task["workspace"] / "made.txt").read_text() == "made\n"
