"""Export of a warehouse schema to DuckDB and SQLite files."""

from __future__ import annotations

import sqlite3

import duckdb
import pyarrow.parquet as pq
import pytest

from ehrbench.errors import MissingInputError
from ehrbench.export import export_parquet, export_schema


@pytest.fixture
def warehouse(tmp_path):
    path = tmp_path / "warehouse.duckdb"
    con = duckdb.connect(str(path))
    con.execute("create schema demo__db")
    con.execute("""create table demo__db.events as select * from (values
        (1, 'a', timestamp '2100-12-31 23:59:00', date '2100-01-02', 1.25::double, true, 3.5::decimal(5,2)),
        (2, null, null, null, null, false, null)) t(row_id, label, charttime, chartdate, value, flag, amount)""")
    con.execute("create table demo__db.empty (row_id integer, name varchar)")
    con.execute("create table main.not_exported as select 1 as x")
    con.close()
    return path


def test_export_writes_only_the_schema_tables_with_sqlite_friendly_values(warehouse, tmp_path):
    counts = export_schema(warehouse, "demo__db", tmp_path / "db" / "x.duckdb", tmp_path / "db" / "x.sqlite")
    assert counts == {"empty": 0, "events": 2}

    con = duckdb.connect(str(tmp_path / "db" / "x.duckdb"), read_only=True)
    assert {t for (t,) in con.execute("select table_name from information_schema.tables").fetchall()} == {
        "empty", "events"}
    assert con.execute("select charttime from events where row_id = 1").fetchone()[0].year == 2100
    con.close()

    lite = sqlite3.connect(tmp_path / "db" / "x.sqlite")
    rows = lite.execute("select * from events order by row_id").fetchall()
    assert rows[0] == (1, "a", "2100-12-31 23:59:00", "2100-01-02", 1.25, 1, 3.5)
    assert rows[1] == (2, None, None, None, None, 0, None)
    # SQLite's own date functions read the exported text as times
    assert lite.execute("select strftime('%Y', charttime), datetime(charttime, '-1 day') from events "
                        "where row_id = 1").fetchone() == ("2100", "2100-12-30 23:59:00")
    assert lite.execute("select count(*) from empty").fetchone() == (0,)
    assert {t for (t,) in lite.execute("select name from sqlite_master where type = 'table'")} == {"empty", "events"}


def test_export_refuses_to_overwrite_and_names_a_missing_schema(warehouse, tmp_path):
    target = tmp_path / "x.duckdb"
    target.write_bytes(b"")
    with pytest.raises(FileExistsError, match="x.duckdb"):
        export_schema(warehouse, "demo__db", target, tmp_path / "x.sqlite")
    with pytest.raises(MissingInputError, match="nope"):
        export_schema(warehouse, "nope", tmp_path / "y.duckdb", tmp_path / "y.sqlite")


def test_export_of_named_tables_leaves_others_and_names_a_missing_one(warehouse, tmp_path):
    counts = export_schema(warehouse, "demo__db", tmp_path / "a.duckdb", tmp_path / "a.sqlite", tables=["events"])
    assert counts == {"events": 2}
    lite = sqlite3.connect(tmp_path / "a.sqlite")
    assert {t for (t,) in lite.execute("select name from sqlite_master where type = 'table'")} == {"events"}
    lite.close()
    with pytest.raises(ValueError, match="lacks table.*stale"):
        export_schema(warehouse, "demo__db", tmp_path / "b.duckdb", tmp_path / "b.sqlite", tables=["events", "stale"])
    assert not (tmp_path / "b.duckdb").exists() and not (tmp_path / "b.sqlite").exists()


def test_parquet_export_keeps_rows_in_a_total_order_and_is_written_once(warehouse, tmp_path):
    path = tmp_path / "hidden" / "events.parquet"
    assert export_parquet(warehouse, "demo__db.events", path) == 2
    table = pq.read_table(path)
    assert table.column_names[:2] == ["row_id", "label"] and table.column("row_id").to_pylist() == [1, 2]
    with pytest.raises(FileExistsError, match="events.parquet"):
        export_parquet(warehouse, "demo__db.events", path)
    assert pq.read_table(path).num_rows == 2  # the published file is untouched
