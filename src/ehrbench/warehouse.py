"""The DuckDB warehouse file and the lock that makes a build its only writer."""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
from collections.abc import Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from ehrbench.environment import environment
from ehrbench.errors import BuildInProgressError, MissingInputError


@contextmanager
def build_lock(lock_path: Path, build_id: str):
    """Hold an exclusive, non-blocking lock for the whole build; released even if the process dies."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    handle = lock_path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown holder"
        handle.close()
        raise BuildInProgressError(f"build in progress: {lock_path} is held by {holder}; wait for that "
                                   "build to finish (the warehouse has a single writer)") from None
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"build_id": build_id, "pid": os.getpid(),
                                 "started_at": datetime.now(UTC).isoformat(timespec="seconds")}))
        handle.flush()
        yield
    finally:
        handle.truncate(0)
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def holds_build_lock(lock_path: Path) -> bool:
    """Whether this process holds the build lock: someone holds it (a fresh handle cannot take it) and the holder
    recorded this process's pid (a live holder always records its own; two live processes never share a pid)."""
    try:
        handle = lock_path.open("r")
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = json.loads(handle.read())
            except ValueError:  # not written yet, or not by build_lock
                return False
            return isinstance(holder, dict) and holder.get("pid") == os.getpid()
        fcntl.flock(handle, fcntl.LOCK_UN)  # nobody held it
        return False


# The storage format of the files `connect` creates (a file keeps the version it was created with). DuckDB's default
# stays readable by DuckDB 0.10, which rules out zstd-compressed text: the FHIR models store their JSON with it, 4-5x
# smaller and faster to write than uncompressed (dbt_project.yml). A fixed version, not "latest": the same DuckDB
# release writes the same files whatever release comes next.
WAREHOUSE_STORAGE_VERSION = "v1.5.0"


# DuckDB's share of the machine's memory in each process. DuckDB's own default, 80 % in each, let the up to three
# processes of a build that query side by side (dbt or an export in the flow's, two stage workers) claim 240 % of the
# machine: at 10,000 patients one was killed for memory (bench/scaleup_build.py). With a fifth each, that build peaked
# at 7.7-8.1 GiB (the flow's dbt run ~5.5 GB beside two workers; its goal is 8); with a sixth, 7.05-7.19 GiB and
# 570-579 s instead of 554-559 s (dbt's largest sorts spill a little more). Past its limit DuckDB spills to disk.
MACHINE_SHARE = 6


def duckdb_memory_limit() -> str:
    """DuckDB's memory limit in every process of ehrbench: $EHRBENCH_DUCKDB_MEMORY_LIMIT, else 1/MACHINE_SHARE of the
    machine's memory."""
    configured = environment().duckdb_memory_limit
    if configured:
        return configured
    return f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // MACHINE_SHARE // 2**20}MiB"


def open_duckdb(database: Path | str = ":memory:", *, read_only: bool = False, storage_version: str | None = None,
                memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection within `memory_limit` (default `duckdb_memory_limit()`; a step that sorts more than it
    should hold gives a lower one) that never draws its progress bar: on a query slower than 2 s it would write the bar
    to the process's stdout, which is the CLI's answer (the published folder) and a flow's output. `storage_version`:
    the format of a file this creates (DuckDB's default otherwise)."""
    config = {"memory_limit": memory_limit or duckdb_memory_limit()}
    if storage_version:
        config["storage_compatibility_version"] = storage_version
    con = duckdb.connect(str(database), read_only=read_only, config=config)
    con.execute("set enable_progress_bar = false")  # a connection's own setting: not settable in `config`
    return con


# SQLite reads a file it maps through the page cache, not with a read() call per page: the ~1,400 gold queries of a demo
# build's questions ran 13 % faster (its own page cache, 2 MB by default, gained half as much)
SQLITE_MMAP_BYTES = 2**30


def open_sqlite_read_only(database: Path | str, *, check_same_thread: bool = True) -> sqlite3.Connection:
    """An exported SQLite database, opened read-only and memory-mapped."""
    uri = f"{Path(database).resolve().as_uri()}?mode=ro"  # as_uri: a '?' or '#' in the path is escaped
    con = sqlite3.connect(uri, uri=True, check_same_thread=check_same_thread)
    con.execute(f"pragma mmap_size = {SQLITE_MMAP_BYTES}")
    return con


@contextmanager
def connect(path: Path, *, read_only: bool = False):
    """Open the warehouse; a writer held by another process becomes BuildInProgressError."""
    if read_only and not path.exists():
        raise MissingInputError(f"{path}: no warehouse yet; run a build first")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        con = open_duckdb(path, read_only=read_only, storage_version=None if read_only else WAREHOUSE_STORAGE_VERSION)
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise BuildInProgressError(f"build in progress: {path} is open for writing by another process "
                                       f"({str(exc).splitlines()[0]})") from None
        raise
    try:
        yield con
    finally:
        con.close()


def table_row_counts(con: duckdb.DuckDBPyConnection, schema_prefixes: tuple[str, ...]) -> dict[str, int]:
    """Row counts of every table and view in schemas starting with one of the prefixes."""
    names = con.execute(
        "select table_schema, table_name from information_schema.tables "
        "where " + " or ".join("table_schema like ?" for _ in schema_prefixes) + " order by 1, 2",
        [p + "%" for p in schema_prefixes]).fetchall()
    return {f"{s}.{t}": con.execute(f'select count(*) from "{s}"."{t}"').fetchone()[0] for s, t in names}


def copy_relations(warehouse: Path, copy: Path, relations: Sequence[str]) -> dict[str, int]:
    """A new DuckDB file `copy` holding `relations` of the warehouse — whole schemas ("dq__mimic_iv") or tables
    ("raw_mimic_iv.patients") — each under its own schema and name, as a table (a view's rows become one). Returns
    the rows per copied relation. Other processes can read the copy while dbt writes the warehouse: DuckDB lets no
    other process open a file that one writes."""
    copy.unlink(missing_ok=True)
    copy.with_name(copy.name + ".wal").unlink(missing_ok=True)
    source = warehouse.stem  # dbt's views name their tables with the warehouse's catalog: attach it under that name
    con = open_duckdb(copy)
    try:
        con.execute(f"attach '{warehouse}' as \"{source}\" (read_only)")
        tables: list[tuple[str, str]] = []
        for relation in relations:
            schema, _, table = relation.partition(".")
            found = [name for (name,) in con.execute(
                "select table_name from information_schema.tables where table_catalog = ? and table_schema = ? "
                "and (? = '' or table_name = ?) order by table_name", [source, schema, table, table]).fetchall()]
            if not found:
                raise MissingInputError(f"{warehouse} has no {relation}; was its dbt model built?")
            tables += [(schema, name) for name in found]
        for schema in dict.fromkeys(schema for schema, _ in tables):
            con.execute(f'create schema "{schema}"')
        counts = {}
        for schema, table in tables:
            con.execute(f'create table "{schema}"."{table}" as select * from "{source}"."{schema}"."{table}"')
            counts[f"{schema}.{table}"] = con.execute(f'select count(*) from "{schema}"."{table}"').fetchone()[0]
        con.execute(f'detach "{source}"')
    except BaseException:
        con.close()
        copy.unlink(missing_ok=True)
        raise
    con.close()
    return counts


def drop_schemas(path: Path, schemas: tuple[str, ...]) -> None:
    """Drop whole schemas. The renamed_random tables are named per build: without this, a rebuild with another
    seed would leave the previous build's tables beside the new ones."""
    with connect(path) as con:
        for schema in schemas:
            con.execute(f'drop schema if exists "{schema}" cascade')
