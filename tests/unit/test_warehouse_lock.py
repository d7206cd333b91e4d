"""The build lock and the single-writer warehouse, contended from a second real process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from contextlib import contextmanager

import duckdb
import pytest

from ehrbench.errors import BuildInProgressError
from ehrbench.warehouse import WAREHOUSE_STORAGE_VERSION, build_lock, connect, table_row_counts

HOLD_LOCK = textwrap.dedent("""
    import sys
    from pathlib import Path
    from ehrbench.warehouse import build_lock
    with build_lock(Path(sys.argv[1]), sys.argv[2]):
        print("ready", flush=True)
        sys.stdin.readline()
""")

HOLD_WAREHOUSE = textwrap.dedent("""
    import sys
    import duckdb
    con = duckdb.connect(sys.argv[1])
    con.execute("create table if not exists t as select 1 as x")
    print("ready", flush=True)
    sys.stdin.readline()
""")


@contextmanager
def other_process(script, *args):
    """Run `script` in another Python process until the block ends; it prints "ready" once it holds."""
    proc = subprocess.Popen([sys.executable, "-c", script, *map(str, args)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line == "ready", proc.stderr.read()
        yield proc
    finally:
        if proc.poll() is None:
            proc.stdin.write("\n")
            proc.stdin.flush()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_second_process_cannot_take_the_build_lock(tmp_path):
    lock = tmp_path / "data" / "build.lock"
    with other_process(HOLD_LOCK, lock, "20261121T120000Z"):
        with pytest.raises(BuildInProgressError) as info, build_lock(lock, "mine"):
            pytest.fail("acquired a lock another process holds")
        message = str(info.value)
        assert "build in progress" in message
        assert "20261121T120000Z" in message and str(lock) in message
    # released when the holder finishes
    with build_lock(lock, "mine"):
        assert json.loads(lock.read_text())["build_id"] == "mine"
    assert lock.read_text() == ""


def test_lock_is_released_when_the_holder_dies(tmp_path):
    lock = tmp_path / "build.lock"
    with other_process(HOLD_LOCK, lock, "doomed") as proc:
        proc.kill()
        proc.wait()
        with build_lock(lock, "next"):
            assert json.loads(lock.read_text())["build_id"] == "next"


def test_lock_records_the_holder(tmp_path):
    import os

    lock = tmp_path / "build.lock"
    with build_lock(lock, "b42"):
        holder = json.loads(lock.read_text())
        assert holder["build_id"] == "b42" and holder["pid"] == os.getpid()


def test_lock_is_released_after_an_exception(tmp_path):
    lock = tmp_path / "build.lock"
    with pytest.raises(RuntimeError), build_lock(lock, "failing"):
        raise RuntimeError("build failed")
    with build_lock(lock, "after"):
        pass


def test_connect_while_another_process_writes(tmp_path):
    path = tmp_path / "warehouse.duckdb"
    with other_process(HOLD_WAREHOUSE, path):
        for read_only in (False, True):
            with pytest.raises(BuildInProgressError) as info, connect(path, read_only=read_only):
                pytest.fail("opened a warehouse another process writes")
            assert "build in progress" in str(info.value) and str(path) in str(info.value)
    with connect(path, read_only=True) as con:
        assert con.execute("select x from t").fetchall() == [(1,)]


def test_connect_read_only_without_warehouse(tmp_path):
    path = tmp_path / "missing.duckdb"
    with pytest.raises(FileNotFoundError, match="no warehouse yet"), connect(path, read_only=True):
        pass
    assert not path.exists()


def test_connect_closes_the_connection(tmp_path):
    path = tmp_path / "w.duckdb"
    with connect(path) as con:
        con.execute("create table t as select 1 as x")
    with pytest.raises(duckdb.ConnectionException):
        con.execute("select 1")


def _storage_version(con) -> str:
    return con.execute("select tags['storage_version'] from duckdb_databases() where database_name = "
                       "current_database()").fetchone()[0]


def test_a_new_warehouse_stores_text_with_zstd_and_keeps_its_format(tmp_path):
    """The FHIR models force zstd for their JSON; DuckDB's default file format would silently store it otherwise."""
    path = tmp_path / "w.duckdb"
    with connect(path) as con:
        assert _storage_version(con).startswith(WAREHOUSE_STORAGE_VERSION)
        con.execute("set force_compression = 'zstd'")
        con.execute("create table t as select repeat('{\"resourceType\":\"Observation\"}', 20) || i as resource "
                    "from range(200000) as r(i)")
        con.execute("checkpoint")
        methods = {m for (m,) in con.execute("select distinct compression from pragma_storage_info('t') "
                                             "where segment_type = 'VARCHAR'").fetchall()}
    assert methods == {"ZSTD"}
    with connect(path, read_only=True) as con:  # reopened with DuckDB's defaults: the file keeps its format
        assert _storage_version(con).startswith(WAREHOUSE_STORAGE_VERSION)


def test_table_row_counts_by_schema_prefix(tmp_path):
    with connect(tmp_path / "w.duckdb") as con:
        con.execute("create schema raw_mimic_iv; create schema raw_eicu; create schema main_ehrsql")
        con.execute("create table raw_mimic_iv.patients as select * from range(3)")
        con.execute("create table raw_eicu.patient as select * from range(5)")
        con.execute("create view raw_eicu.adults as select * from raw_eicu.patient where range > 1")
        con.execute("create table main_ehrsql.cost as select * from range(7)")
        assert table_row_counts(con, ("raw_",)) == {"raw_eicu.adults": 3, "raw_eicu.patient": 5,
                                                    "raw_mimic_iv.patients": 3}
        assert table_row_counts(con, ("main_", "raw_mimic")) == {"main_ehrsql.cost": 7,
                                                                 "raw_mimic_iv.patients": 3}


def test_duckdb_gets_a_sixth_of_the_machines_memory_unless_told_otherwise(monkeypatch, tmp_path):
    import os

    import yaml

    from ehrbench.transform import PROJECT_DIR, _dbt_environment
    from ehrbench.warehouse import duckdb_memory_limit, open_duckdb

    monkeypatch.delenv("EHRBENCH_DUCKDB_MEMORY_LIMIT", raising=False)
    sixth = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 6  # two workers and the flow's process: half
    with open_duckdb() as con:
        (limit,) = con.execute("select current_setting('memory_limit')").fetchone()
    number, unit = limit.split()
    assert unit == "GiB" and abs(float(number) * 2**30 - sixth) < 0.06 * 2**30  # DuckDB prints one decimal
    with open_duckdb(memory_limit="1GiB") as con:  # a step's own, lower limit
        assert con.execute("select current_setting('memory_limit')").fetchone() == ("1.0 GiB",)
    monkeypatch.setenv("EHRBENCH_DUCKDB_MEMORY_LIMIT", "1.5GiB")
    with connect(tmp_path / "warehouse.duckdb") as con:
        assert con.execute("select current_setting('memory_limit')").fetchone() == ("1.5 GiB",)
    # dbt's connection: profiles.yml reads the variable, which a dbt run always has
    profile = yaml.safe_load((PROJECT_DIR / "profiles.yml").read_text())["ehrbench"]["outputs"]["warehouse"]
    assert profile["settings"]["memory_limit"] == "{{ env_var('EHRBENCH_DUCKDB_MEMORY_LIMIT') }}"
    monkeypatch.delenv("EHRBENCH_DUCKDB_MEMORY_LIMIT")
    with _dbt_environment(tmp_path / "warehouse.duckdb"):
        assert os.environ["EHRBENCH_DUCKDB_MEMORY_LIMIT"] == duckdb_memory_limit() == f"{int(sixth) // 2**20}MiB"
    assert "EHRBENCH_DUCKDB_MEMORY_LIMIT" not in os.environ
    monkeypatch.setenv("EHRBENCH_DUCKDB_MEMORY_LIMIT", "a lot")
    with pytest.raises(ValueError, match="duckdb_memory_limit"):
        duckdb_memory_limit()
