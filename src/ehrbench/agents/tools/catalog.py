"""The catalog of an agent-facing database as column_search shows it: tables, columns with their types and NOT NULL,
primary, foreign and unique keys — read through the SQL sandbox (DuckDB: information_schema and
duckdb_constraints(); SQLite: the schema PRAGMAs the sandbox allows)."""

from __future__ import annotations

from collections.abc import Callable

from ehrbench.agents.sandbox import QueryResult
from ehrbench.agents.tools.ehrchatqa import TableShape

# runs one statement of the tools' own, without a practical row cap
Runner = Callable[[str], QueryResult]


def read_catalog(run: Runner, engine: str) -> dict[str, TableShape]:
    """Table name -> its shape, tables in name order, columns in catalog order."""
    return _duckdb_catalog(run) if engine == "duckdb" else _sqlite_catalog(run)


def sql_literal(text: str) -> str:
    """A SQL string literal for any text (standard quoting, the same in DuckDB and SQLite: backslashes are plain)."""
    return "'" + text.replace("'", "''") + "'"


def sql_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _duckdb_catalog(run: Runner) -> dict[str, TableShape]:
    columns: dict[str, list[tuple[str, str, bool]]] = {}
    for table, column, kind, nullable in run(
            "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_schema = 'main' AND table_catalog = current_database() "
            "ORDER BY table_name, ordinal_position").rows:
        columns.setdefault(table, []).append((column, kind, nullable == "NO"))
    keys: dict[str, dict] = {table: {"pk": [], "fk": [], "unique": []} for table in columns}
    for table, kind, names, other, other_names in run(
            "SELECT table_name, constraint_type, constraint_column_names, referenced_table, referenced_column_names "
            "FROM duckdb_constraints() WHERE schema_name = 'main' AND database_name = current_database() "
            "AND constraint_type IN ('PRIMARY KEY', 'FOREIGN KEY', 'UNIQUE') "
            "ORDER BY table_name, constraint_index").rows:
        if table not in keys:
            continue
        if kind == "PRIMARY KEY":
            keys[table]["pk"] += list(names)
        elif kind == "FOREIGN KEY":
            keys[table]["fk"] += [(column, other, other_column)
                                  for column, other_column in zip(names, other_names or names, strict=False)]
        elif names:  # the published tool shows a unique key by its first column
            keys[table]["unique"].append(names[0])
    return {table: TableShape(table, tuple(cols), tuple(keys[table]["pk"]), tuple(keys[table]["fk"]),
                              tuple(keys[table]["unique"]))
            for table, cols in columns.items()}


def _sqlite_catalog(run: Runner) -> dict[str, TableShape]:
    tables = [name for (name,) in run(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' "
        "ESCAPE '\\' ORDER BY name").rows]
    catalog = {}
    for table in tables:  # pragma_table_info() is not allowed by the sandbox; the PRAGMA statements are
        info = run(f"PRAGMA table_info({sql_literal(table)})").rows  # cid, name, type, notnull, default, pk
        primary = [row[1] for row in sorted((row for row in info if row[5]), key=lambda row: row[5])]
        foreign = [(row[3], row[2], row[4] or "") for row in  # id, seq, table, from, to, …
                   run(f"PRAGMA foreign_key_list({sql_literal(table)})").rows]
        unique = []
        for index in run(f"PRAGMA index_list({sql_literal(table)})").rows:  # seq, name, unique, origin, partial
            if index[3] == "u":
                indexed = run(f"PRAGMA index_info({sql_literal(index[1])})").rows  # seqno, cid, name
                if indexed:  # the published tool shows a unique key by its first column
                    unique.append(indexed[0][2])
        catalog[table] = TableShape(table, tuple((row[1], row[2] or "", bool(row[3])) for row in info),
                                    tuple(primary), tuple(foreign), tuple(unique))
    return catalog
