"""Export a warehouse schema as stand-alone database files: DuckDB and SQLite.

Agent-facing files hold only the schema's tables. In SQLite, timestamps become
`YYYY-MM-DD HH:MM:SS` text and dates `YYYY-MM-DD`, so that SQLite's date functions
(`strftime`, `datetime`) used by the published gold SQL work on them. Numbers are INTEGER or REAL columns, or, for a
database whose published SQLite file has NUMERIC columns (`BenchmarkDatabase.sqlite_numeric`), NUMERIC ones: a
whole-number value is then stored as an integer (11, not 11.0). Columns that such a file stores as text although they
hold numbers (`BenchmarkDatabase.sqlite_text_columns`) are TEXT in SQLite only; the DuckDB file keeps their type.

`export_benchmark_database` writes one benchmark database into a build: its agent-facing files and its hidden ones
(lineage, rename map), and returns the build manifest's entry for it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence
from pathlib import Path

import duckdb

from ehrbench.errors import MissingInputError
from ehrbench.layout import BuildLayout
from ehrbench.profiles import LINEAGE_MODELS, BenchmarkDatabase
from ehrbench.renaming import SchemaRename
from ehrbench.warehouse import open_duckdb

_BATCH = 50_000
_SQLITE_TYPES = {"BOOLEAN": "INTEGER", "TINYINT": "INTEGER", "SMALLINT": "INTEGER", "INTEGER": "INTEGER",
                 "BIGINT": "INTEGER", "HUGEINT": "INTEGER", "FLOAT": "REAL", "DOUBLE": "REAL"}


def schema_tables(con: duckdb.DuckDBPyConnection, catalog: str, schema: str) -> list[str]:
    rows = con.execute("select table_name from information_schema.tables where table_catalog = ? "
                       "and table_schema = ? order by table_name", [catalog, schema]).fetchall()
    return [name for (name,) in rows]


def export_schema(warehouse: Path, schema: str, duckdb_path: Path, sqlite_path: Path,
                  tables: Sequence[str] | None = None, *, sqlite_numeric: bool = False,
                  sqlite_text: Collection[tuple[str, str]] = ()) -> dict[str, int]:
    """Write every table of `schema` (or exactly `tables`, which must all exist) to `duckdb_path` and
    `sqlite_path`; return row counts per table. `sqlite_numeric`: numeric columns get SQLite's NUMERIC affinity;
    `sqlite_text`: (table, column) pairs written to SQLite as text."""
    for path in (duckdb_path, sqlite_path):
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            raise FileExistsError(f"{path} exists; database files of a build are written once")
    # The export file is the writable main database; the warehouse is attached read-only under its own
    # catalog name (its views refer to it by that name).
    con = open_duckdb(str(duckdb_path))
    try:
        source = warehouse.stem
        con.execute(f"attach '{warehouse}' as \"{source}\" (read_only)")
        present = schema_tables(con, source, schema)
        if not present:
            raise MissingInputError(f"schema {schema!r} has no tables in {warehouse}; was its dbt profile built?")
        if tables is not None:
            missing = sorted(set(tables) - set(present))
            if missing:
                raise ValueError(f"schema {schema!r} in {warehouse} lacks table(s) {', '.join(missing)}")
        tables = sorted(tables) if tables is not None else present
        counts = {}
        for table in tables:
            # A total, reproducible row order (row_id first where the schema has one): gold SQL with a
            # LIMIT but no ORDER BY must see the rows in the same order in every build.
            con.execute(f'create table main."{table}" as select * from "{source}"."{schema}"."{table}" order by all')
            counts[table] = con.execute(f'select count(*) from main."{table}"').fetchone()[0]
        con.execute(f'detach "{source}"')
        _write_sqlite(con, tables, sqlite_path, sqlite_numeric, set(sqlite_text))
    except BaseException:
        con.close()
        duckdb_path.unlink(missing_ok=True)
        sqlite_path.unlink(missing_ok=True)
        raise
    con.close()
    return counts


def export_parquet(warehouse: Path, relation: str, path: Path) -> int:
    """Write a warehouse relation (`schema.table`) to a parquet file (hidden build files); return its rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        raise FileExistsError(f"{path} exists; files of a build are written once")
    con = open_duckdb(str(warehouse), read_only=True)
    try:
        rows = con.execute(f"select count(*) from {relation}").fetchone()[0]
        target = str(path).replace("'", "''")
        con.execute(f"copy (select * from {relation} order by all) to '{target}' (format parquet)")
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    finally:
        con.close()
    return rows


def export_benchmark_database(warehouse: Path, build: BuildLayout, database: BenchmarkDatabase,
                              rename: SchemaRename | None = None) -> dict:
    """Write `database` into the build: `db/<profile>/<database>.duckdb|.sqlite` (agent-facing; a renamed profile's
    files hold exactly its renamed tables), its hidden lineage when it has one (LINEAGE_MODELS) and, given
    `rename`, its hidden rename map. Returns the manifest's entry: schema, files and hidden files relative to the
    build, row counts per table."""
    duckdb_file, sqlite_file = build.database_files(database.profile, database.database)
    tables = [table.target for table in rename.tables] if rename else None
    text_columns = [(rename.table(table).target, rename.table(table).column(column)) if rename else (table, column)
                    for table, column in database.sqlite_text_columns]
    counts = export_schema(warehouse, database.schema, duckdb_file, sqlite_file, tables=tables,
                           sqlite_numeric=database.sqlite_numeric, sqlite_text=text_columns)
    entry = {"schema": database.schema, "duckdb": build.relative(duckdb_file), "sqlite": build.relative(sqlite_file),
             "row_counts": counts, "hidden": {}}
    if database.key in LINEAGE_MODELS:
        lineage_file = build.lineage(database.key)
        export_parquet(warehouse, LINEAGE_MODELS[database.key], lineage_file)
        entry["hidden"]["lineage"] = build.relative(lineage_file)
    if rename:
        entry["hidden"]["rename_map"] = build.relative(write_rename_map(rename, build.rename_map(database.key)))
    return entry


def write_rename_map(rename: SchemaRename, path: Path) -> Path:
    """A renamed profile's hidden rename map (compatibility schema -> the profile's names) as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rename.to_dict(), indent=1) + "\n")
    return path


def _write_sqlite(con: duckdb.DuckDBPyConnection, tables: list[str], sqlite_path: Path, numeric: bool,
                  text_columns: set[tuple[str, str]]) -> None:
    """Copy the exported tables (in `con`'s main schema) into a new SQLite file."""
    target = sqlite3.connect(sqlite_path)
    try:
        for table in tables:
            columns = con.execute(
                "select column_name, data_type from information_schema.columns "
                "where table_catalog = current_database() and table_schema = 'main' and table_name = ? "
                "order by ordinal_position", [table]).fetchall()
            columns = [(name, "VARCHAR" if (table, name) in text_columns else kind) for name, kind in columns]
            definitions = ", ".join(f'"{name}" {_sqlite_type(kind, numeric)}' for name, kind in columns)
            target.execute(f'create table "{table}" ({definitions})')
            select = ", ".join(_as_sqlite_value(name, kind) for name, kind in columns)
            result = con.execute(f'select {select} from main."{table}"')
            placeholders = ", ".join("?" for _ in columns)
            while batch := result.fetchmany(_BATCH):
                target.executemany(f'insert into "{table}" values ({placeholders})', batch)
        target.commit()
    finally:
        target.close()


def _sqlite_type(duckdb_type: str, numeric: bool = False) -> str:
    kind = "REAL" if duckdb_type.startswith("DECIMAL") else _SQLITE_TYPES.get(duckdb_type, "TEXT")
    return "NUMERIC" if numeric and kind != "TEXT" else kind


def _as_sqlite_value(name: str, duckdb_type: str) -> str:
    column = f'"{name}"'
    if duckdb_type.startswith("TIMESTAMP"):
        return f"strftime({column}, '%Y-%m-%d %H:%M:%S')"
    if duckdb_type == "DATE":
        return f"strftime({column}, '%Y-%m-%d')"
    if duckdb_type.startswith("DECIMAL"):
        return f"{column}::double"
    if duckdb_type in _SQLITE_TYPES:
        return column
    return f"{column}::varchar"
