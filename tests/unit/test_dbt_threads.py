"""How many models dbt builds at a time (ehrbench.transform.dbt_threads): two on small raw tables, one on large."""

import duckdb

from ehrbench import transform
from ehrbench.transform import dbt_threads


def warehouse_with(path, **tables: int):
    with duckdb.connect(str(path)) as con:
        for name, rows in tables.items():
            schema, table = name.split("__")
            con.execute(f"create schema if not exists {schema}")
            con.execute(f"create table {schema}.{table} as select range as i from range({rows})")
    return path


def test_small_raw_tables_get_two_threads_and_large_ones_one(tmp_path, monkeypatch):
    monkeypatch.setattr(transform, "PARALLEL_MODELS_UP_TO_RAW_ROWS", 100)
    assert dbt_threads(warehouse_with(tmp_path / "small.duckdb", raw_mimic_iv__a=60, raw_eicu__b=40)) == 2
    assert dbt_threads(warehouse_with(tmp_path / "large.duckdb", raw_mimic_iv__a=60, raw_eicu__b=41)) == 1


def test_only_the_raw_tables_count(tmp_path, monkeypatch):
    monkeypatch.setattr(transform, "PARALLEL_MODELS_UP_TO_RAW_ROWS", 100)
    assert dbt_threads(warehouse_with(tmp_path / "w.duckdb", raw_mimic_iv__a=10, staging_mimic_iv__a=500)) == 2


def test_a_warehouse_not_yet_made_gets_one(tmp_path):
    assert dbt_threads(tmp_path / "none.duckdb") == 1


def test_the_demos_get_two():
    assert transform.PARALLEL_MODELS_UP_TO_RAW_ROWS >= 2_487_431  # both demos' raw rows (the build's ingest line)


def test_a_warehouse_another_process_holds_gets_one_and_no_error_of_its_own(tmp_path):
    import subprocess
    import sys

    path = warehouse_with(tmp_path / "held.duckdb", raw_mimic_iv__a=10)
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); time.sleep(60)", str(path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert dbt_threads(path) == 1  # dbt's own attempt to open it then says why it cannot
    finally:
        holder.kill()
        holder.wait()


def test_a_runs_span_counts_overlapping_nodes_once():
    from datetime import datetime, timedelta

    from ehrbench.transform import DbtRun, NodeResult

    t0 = datetime(2026, 1, 1)

    def node(name, start, end):
        return NodeResult(f"model.ehrbench.{name}", "model", "success", end - start, None,
                          t0 + timedelta(seconds=start), t0 + timedelta(seconds=end))

    side_by_side = DbtRun(("run",), (node("a", 0, 3), node("b", 1, 4), node("c", 4, 5.5)))
    assert side_by_side.span_seconds == 5.5  # not the nodes' own 3 + 3 + 1.5 seconds
    assert DbtRun(("run",), (NodeResult("model.ehrbench.x", "model", "error", 0.0, "boom"),)).span_seconds == 0.0
