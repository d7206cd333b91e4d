"""The OS sandbox's plumbing: when agent code may run at all, how SQL results cross from the worker, and what caps
the worker applies."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from pathlib import Path

import duckdb
import pytest
import typer

from ehrbench.agents.sandbox import SandboxUnavailable, bubblewrap, isolation, sql_worker
from ehrbench.agents.sandbox.sql_worker import decode_cell, encode_cell


@pytest.fixture
def no_bubblewrap(monkeypatch):
    bubblewrap.unavailable_reason.cache_clear()
    monkeypatch.setattr(bubblewrap.shutil, "which", lambda name: None)
    yield
    bubblewrap.unavailable_reason.cache_clear()


def test_without_bubblewrap_agent_code_is_refused_unless_unsafe_is_asked_for(no_bubblewrap):
    with pytest.raises(SandboxUnavailable, match=r"bubblewrap is not installed .* pass --unsafe-sandbox"):
        isolation(allow_unsafe=False)
    assert isolation(allow_unsafe=True).startswith("unsafe: bubblewrap is not installed")


def test_the_cli_refuses_llm_agents_without_a_sandbox_before_prefect_starts(no_bubblewrap, capsys):
    from ehrbench.cli.checks import check_sandbox

    check_sandbox(["oracle", "abstain"], {}, unsafe=False)  # baselines run no agent code: nothing to isolate
    with pytest.raises(typer.Exit) as stopped:
        check_sandbox(["llm:qwen@http://127.0.0.1:9/v1"], {}, unsafe=False)
    assert stopped.value.exit_code == 2
    assert "--unsafe-sandbox" in capsys.readouterr().err
    check_sandbox(["llm:qwen@http://127.0.0.1:9/v1"], {}, unsafe=True)


def test_confined_argv_binds_the_view_read_only_and_drops_to_nobody():
    argv = bubblewrap.confined_argv(["python", "-c", "pass"], view={"mimic_iv.duckdb": Path("/data/x/mimic.duckdb")})
    joined = " ".join(argv)
    assert "--ro-bind /data/x/mimic.duckdb /view/mimic_iv.duckdb" in joined
    assert "--bind " not in joined  # nothing of the host is writable
    for flag in ("--unshare-pid", "--unshare-net", "--die-with-parent", "--clearenv", "--new-session"):
        assert flag in argv
    assert argv[-3:] == ["python", "-c", "pass"]


@pytest.mark.parametrize("value", [
    None, True, 0, -7, 2**70, 1.5, float("inf"), float("nan"), "text", "", b"\x00\xffbytes",
    decimal.Decimal("12.340"), datetime.date(2180, 7, 1), datetime.datetime(2180, 7, 1, 6, 30, 5, 12),
    datetime.datetime(2180, 7, 1, 6, 30, tzinfo=datetime.UTC), datetime.time(23, 59, 1),
    datetime.timedelta(days=-3, seconds=5, microseconds=7), uuid.UUID(int=5), [1, "a", None],
    {"a": 1, "b": [datetime.date(2100, 1, 1)]}, [[1, 2], [3]],
])
def test_cell_values_cross_as_tagged_json_and_come_back_the_same(value):
    encoded, cut = encode_cell(value, 1000)
    back = decode_cell(json.loads(json.dumps(encoded)))
    assert not cut
    if isinstance(value, float) and value != value:
        assert back != back
    else:
        assert back == value and type(back) is type(value)


def test_a_long_cell_is_cut_and_counted():
    assert encode_cell("x" * 50, 10) == ("x" * 10, True)
    assert encode_cell(b"y" * 50, 10)[1] is True
    text, cut = encode_cell(list(range(1000)), 20)
    assert cut and isinstance(text, str) and len(text) == 20


@pytest.mark.parametrize("reply", [{"$exec": "print(1)"}, {"$d": "1", "$f": "2"}])
def test_the_evaluator_refuses_cells_it_does_not_know(reply):
    with pytest.raises(ValueError):
        decode_cell(reply)


def test_the_worker_stops_at_the_row_and_byte_caps(tmp_path: Path):
    """Run the worker's own loop in-process on a real DuckDB file: caps in rows, then in bytes."""
    database = tmp_path / "db.duckdb"
    with duckdb.connect(str(database)) as con:
        con.execute("create table t as select range as i, repeat('v', 1000) as s from range(500)")
    requests = [{"op": "open"},
                {"op": "execute", "sql": "select i from t order by i", "max_rows": 10, "max_cell_chars": 100,
                 "max_bytes": 10**6, "timeout_s": 10},
                {"op": "execute", "sql": "select s from t", "max_rows": 500, "max_cell_chars": 100_000,
                 "max_bytes": 10_050, "timeout_s": 10},
                {"op": "execute", "sql": "select 1; select 2", "max_rows": 1, "max_cell_chars": 1, "max_bytes": 10,
                 "timeout_s": 10}]
    replies: list[str] = []

    class Sink:
        def write(self, text):
            replies.append(text)

        def flush(self):
            pass

    config = {"path": str(database), "engine": "duckdb", "memory_limit": "256MB", "threads": 1}
    sql_worker.serve(config, [json.dumps(r) for r in requests], Sink())
    opened, by_rows, by_bytes, two = (json.loads(r) for r in replies)
    assert opened == {"ok": True}
    assert [row[0] for row in by_rows["rows"]] == list(range(10)) and by_rows["more_rows"]
    assert len(by_bytes["rows"]) == 10 and by_bytes["bytes_capped"]  # each row is 1,004 bytes of JSON
    assert two == {"ok": False, "kind": "statements", "error": "2"}


def test_confined_python_has_single_threaded_math_and_none_of_the_evaluators_environment(monkeypatch):
    """Inside bubblewrap the environment is cleared: the thread-pool settings must be set again there, or numpy's
    BLAS would start a thread per core against the process limit."""
    from ehrbench.agents.sandbox import run_python

    monkeypatch.setenv("EHRBENCH_TEST_SECRET_KEY", "sk-not-for-agents")
    result = run_python("import os\nprint(os.environ.get('OPENBLAS_NUM_THREADS'), os.environ.get('OMP_NUM_THREADS'),"
                        " 'EHRBENCH_TEST_SECRET_KEY' in os.environ)")
    assert result.stdout == "1 1 False\n", result.stderr
