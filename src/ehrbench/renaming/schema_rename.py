"""Table and column renames of one database schema (docs/benchmarks.md#ehr-chatqa-renamed-schemas).

A `SchemaRename` maps a source schema (e.g. the EHRSQL-2024 tables) to a target schema (e.g. the
EHR-ChatQA names). The published EHR-ChatQA map is read from the dbt seed; seeded synonym draws
(`random_rename`) are composed on top of it with `then`. Column order is the schema's column order.
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ehrbench.errors import ConfigError

DEFAULT_RENAME_MAP = Path(__file__).resolve().parents[3] / "dbt_project" / "seeds" / "ehrchatqa_rename_map.csv"
RENAME_MAP_FIELDS = ("db", "source_table", "target_table", "source_column", "target_column")


def _duplicates(names: list[str]) -> list[str]:
    return [name for name, count in Counter(names).items() if count > 1]


@dataclass(frozen=True)
class TableRename:
    """One table's new name and its columns' (source, target) names in schema order."""

    source: str
    target: str
    columns: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        for side, names in (("source", [s for s, _ in self.columns]), ("target", [t for _, t in self.columns])):
            if duplicated := _duplicates(names):
                raise ValueError(f"table {self.source!r}: duplicate {side} column(s) {', '.join(duplicated)}")

    def column(self, source_name: str) -> str:
        for source, target in self.columns:
            if source == source_name:
                return target
        raise KeyError(f"table {self.source!r} has no column {source_name!r}")

    def has_column(self, source_name: str) -> bool:
        return any(source == source_name for source, _ in self.columns)


@dataclass(frozen=True)
class SchemaRename:
    """The renames of every table of one database, in schema order."""

    database: str
    tables: tuple[TableRename, ...]

    def __post_init__(self) -> None:
        for side, names in (("source", [t.source for t in self.tables]), ("target", [t.target for t in self.tables])):
            if duplicated := _duplicates(names):
                raise ValueError(f"database {self.database!r}: duplicate {side} table(s) {', '.join(duplicated)}")

    def table(self, source_name: str) -> TableRename:
        for table in self.tables:
            if table.source == source_name:
                return table
        raise KeyError(f"database {self.database!r} has no table {source_name!r}")

    def has_table(self, source_name: str) -> bool:
        return any(table.source == source_name for table in self.tables)

    def then(self, other: SchemaRename) -> SchemaRename:
        """Composition: `self` maps A→B and `other` maps B→C; the result maps A→C.

        Tables of `other` that `self` never produces are dropped."""
        if other.database != self.database:
            raise ValueError(f"cannot compose a {self.database!r} rename with a {other.database!r} rename")
        composed = []
        for table in self.tables:
            if not other.has_table(table.target):
                raise ValueError(f"the second {other.database!r} rename has no table {table.target!r}")
            next_table = other.table(table.target)
            columns = []
            for source, middle in table.columns:
                if not next_table.has_column(middle):
                    raise ValueError(f"the second {other.database!r} rename has no column {table.target}.{middle}")
                columns.append((source, next_table.column(middle)))
            composed.append(TableRename(table.source, next_table.target, tuple(columns)))
        return SchemaRename(self.database, tuple(composed))

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (recorded in the build manifest); `from_dict` reads it back."""
        return {
            "database": self.database,
            "tables": [
                {"source": t.source, "target": t.target, "columns": [[s, c] for s, c in t.columns]}
                for t in self.tables
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SchemaRename:
        tables = tuple(
            TableRename(t["source"], t["target"], tuple((s, c) for s, c in t["columns"])) for t in data["tables"]
        )
        return cls(data["database"], tables)

    def dbt_var(self) -> dict[str, dict[str, Any]]:
        """The form the dbt models read: {source table: {"name": target, "columns": {source: target}}}."""
        return {t.source: {"name": t.target, "columns": dict(t.columns)} for t in self.tables}

    def table_name_values(self) -> dict[str, str]:
        """Source table name → target table name, for data values that name a table (cost event types)."""
        return {t.source: t.target for t in self.tables}


def published_rename(database: str, path: Path | None = None) -> SchemaRename:
    """The published EHR-ChatQA rename of `database` ("mimic_iv" or "eicu"), read from the seed CSV.

    Tables and columns keep the CSV's row order, which is the renamed schema's column order."""
    path = path or DEFAULT_RENAME_MAP
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if missing := [field for field in RENAME_MAP_FIELDS if field not in (reader.fieldnames or [])]:
            expected = ", ".join(RENAME_MAP_FIELDS)
            raise ConfigError(f"{path}: missing column(s) {', '.join(missing)} (expected {expected})")
        rows = list(reader)

    targets: dict[str, str] = {}
    columns: dict[str, list[tuple[str, str]]] = {}
    for line, row in enumerate(rows, start=2):
        if row["db"] != database:
            continue
        if empty := [field for field in RENAME_MAP_FIELDS if not (row[field] or "").strip()]:
            raise ConfigError(f"{path}, line {line}: empty field(s) {', '.join(empty)}")
        source = row["source_table"]
        if targets.setdefault(source, row["target_table"]) != row["target_table"]:
            raise ConfigError(
                f"{path}, line {line}: target_table {row['target_table']!r} contradicts "
                f"{targets[source]!r} given earlier for source_table {source!r}"
            )
        columns.setdefault(source, []).append((row["source_column"], row["target_column"]))

    if not targets:
        known = sorted({row["db"] for row in rows})
        raise ConfigError(f"{path}: no rows with db {database!r} (databases in the file: {', '.join(known)})")
    try:
        return SchemaRename(
            database, tuple(TableRename(source, targets[source], tuple(columns[source])) for source in targets)
        )
    except ValueError as err:
        raise ConfigError(f"{path}: {err}") from err
