"""Verify raw release files and load them into the warehouse as `raw_<dataset>.<table>`.

A file is loaded only when its SHA-256 differs from the one recorded at its last load
(`ingest_meta.loaded_files`), so a rebuild on unchanged inputs skips the CSV parsing.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb

from ehrbench.errors import ChecksumError, SourceError
from ehrbench.sources.checksums import Verification, check_gzip_complete, read_checksums, sha256_file
from ehrbench.sources.releases import CHECKSUM_FILE, Release, TableSpec, raw_schema

META_SCHEMA = "ingest_meta"
Origin = Literal["local", "downloaded"]


@dataclass(frozen=True)
class IngestedFile:
    """One row of the manifest's `inputs` and of the ingest artifact."""

    dataset: str
    table: str
    path: str
    required: bool
    verification: Verification
    sha256: str | None
    expected_sha256: str | None
    rows: int
    action: Literal["loaded", "unchanged", "absent"]

    @property
    def verified(self) -> bool:
        return self.verification is Verification.VERIFIED

    @property
    def status(self) -> Literal["verified", "unverified", "absent"]:
        if self.verification is Verification.ABSENT:
            return "absent"
        return "verified" if self.verified else "unverified"


@dataclass(frozen=True)
class ReleaseIngest:
    """What one release contributed to a build."""

    dataset: str
    edition: str
    version: str
    source_dir: str
    origin: Origin
    files: list[IngestedFile]


def ingest_release(con: duckdb.DuckDBPyConnection, release: Release, source_dir: Path, *,
                   origin: Origin, strict_checksums: bool = False,
                   on_table: Callable[[IngestedFile], None] | None = None) -> list[IngestedFile]:
    """Check and load every table of `release` found in `source_dir`.

    Raises SourceError for a missing directory or required table, a wrong header or an unreadable
    file; ChecksumError for a mismatch of a downloaded file, or of a local one in strict mode.
    """
    if not source_dir.is_dir():
        raise SourceError(f"{release.dataset} source directory {source_dir} does not exist; expected the "
                          f"{release.dataset} {release.edition} {release.version} release layout there")
    sums_path = source_dir / CHECKSUM_FILE
    expected = read_checksums(sums_path) if sums_path.exists() else {}
    if not expected and strict_checksums:
        raise ChecksumError(f"{sums_path} is missing or empty; strict checksums need the release's "
                            f"{CHECKSUM_FILE}")

    # Fail on every missing required table before loading anything.
    missing = [spec for spec in release.tables if spec.required and not (source_dir / spec.path).exists()]
    if missing:
        names = ", ".join(f"{spec.name} ({spec.path})" for spec in missing)
        raise SourceError(f"required {release.dataset} table(s) missing: {names}; searched {source_dir}")

    _ensure_meta(con)
    con.execute(f"create schema if not exists {raw_schema(release.dataset)}")
    results = []
    for spec in release.tables:
        result = _ingest_table(con, spec, source_dir / spec.path, expected.get(spec.path),
                               origin=origin, strict_checksums=strict_checksums)
        results.append(result)
        if on_table:
            on_table(result)
    return results


def _ingest_table(con: duckdb.DuckDBPyConnection, spec: TableSpec, path: Path, expected: str | None, *,
                  origin: Origin, strict_checksums: bool) -> IngestedFile:
    if not path.exists():
        _create_empty(con, spec)
        return IngestedFile(spec.dataset, spec.name, str(path), spec.required, Verification.ABSENT,
                            None, expected, 0, "absent")

    actual = sha256_file(path)
    if expected is None:
        verification = Verification.UNLISTED
    else:
        verification = Verification.VERIFIED if actual == expected else Verification.MISMATCH
    if verification is not Verification.VERIFIED and (strict_checksums or origin == "downloaded"):
        what = f"SHA-256 {actual}, expected {expected}" if expected else f"no line in {CHECKSUM_FILE}"
        why = "strict checksums are on" if strict_checksums else "downloaded files must match"
        raise ChecksumError(f"{path}: {what} from {CHECKSUM_FILE} ({spec.dataset}.{spec.name}); {why}")

    if _loaded_checksum(con, spec) == actual:
        rows = con.execute(f"select count(*) from {spec.qualified_name}").fetchone()[0]
        return IngestedFile(spec.dataset, spec.name, str(path), spec.required, verification, actual,
                            expected, rows, "unchanged")

    _check_header(spec, path)
    if verification is not Verification.VERIFIED:
        check_gzip_complete(path)  # only a matching checksum proves the file is whole
    rows = _load(con, spec, path, actual)
    return IngestedFile(spec.dataset, spec.name, str(path), spec.required, verification, actual,
                        expected, rows, "loaded")


def _check_header(spec: TableSpec, path: Path) -> None:
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
            first = f.readline()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise SourceError(f"{path}: cannot read the header line ({exc}); "
                          "expected a gzip-compressed CSV") from None
    found = [name.strip().strip('"').lower() for name in first.rstrip("\r\n").split(",")]
    wanted = [name for name, _ in spec.columns]
    if found != wanted:
        extra = [c for c in found if c not in wanted]
        lacking = [c for c in wanted if c not in found]
        detail = (f"missing {lacking}, unexpected {extra}" if extra or lacking
                  else "same columns in another order")
        raise SourceError(f"{path}: header does not match {spec.dataset}.{spec.name} ({detail}); "
                          f"expected columns: {','.join(wanted)}")


def _load(con: duckdb.DuckDBPyConnection, spec: TableSpec, path: Path, sha256: str) -> int:
    columns = "{" + ", ".join(f"'{name}': '{kind}'" for name, kind in spec.columns) + "}"
    con.execute("begin transaction")
    try:
        con.execute(
            f"create or replace table {spec.qualified_name} as select * from read_csv(?, header = true, "
            f"auto_detect = false, delim = ',', quote = '\"', escape = '\"', columns = {columns})",
            [str(path)],
        )
        rows = con.execute(f"select count(*) from {spec.qualified_name}").fetchone()[0]
        con.execute(f"delete from {META_SCHEMA}.loaded_files where schema_name = ? and table_name = ?",
                    [raw_schema(spec.dataset), spec.name])
        con.execute(f"insert into {META_SCHEMA}.loaded_files values (?, ?, ?, ?, ?, ?, now())",
                    [raw_schema(spec.dataset), spec.name, str(path), sha256, _layout_key(spec), rows])
        con.execute("commit")
    except duckdb.Error as exc:
        con.execute("rollback")
        lines = [line.strip() for line in str(exc).strip().splitlines()]
        # DuckDB's first line says only "CSV Error on Line: n"; the column, value and type follow.
        reason = "; ".join([lines[0]] + [ln for ln in lines[1:] if ln.startswith("Error when converting")])
        raise SourceError(f"{path}: cannot be loaded as {spec.dataset}.{spec.name} with its documented "
                          f"column types: {reason}") from None
    return rows


def _create_empty(con: duckdb.DuckDBPyConnection, spec: TableSpec) -> None:
    """An absent optional table still exists, empty and typed, so downstream models run."""
    columns = ", ".join(f'"{name}" {kind}' for name, kind in spec.columns)
    con.execute(f"create or replace table {spec.qualified_name} ({columns})")
    con.execute(f"delete from {META_SCHEMA}.loaded_files where schema_name = ? and table_name = ?",
                [raw_schema(spec.dataset), spec.name])


def _ensure_meta(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"create schema if not exists {META_SCHEMA}")
    con.execute(f"""create table if not exists {META_SCHEMA}.loaded_files (
        schema_name varchar, table_name varchar, path varchar, sha256 varchar, layout_key varchar,
        row_count bigint, loaded_at timestamptz)""")
    # Warehouses made before layout_key existed get the column (their tables then reload once).
    con.execute(f"alter table {META_SCHEMA}.loaded_files add column if not exists layout_key varchar")


def _loaded_checksum(con: duckdb.DuckDBPyConnection, spec: TableSpec) -> str | None:
    """SHA-256 of the file behind the table, if it was loaded with the current column layout."""
    row = con.execute(
        f"""select f.sha256 from {META_SCHEMA}.loaded_files f
            join information_schema.tables t on t.table_schema = f.schema_name and t.table_name = f.table_name
            where f.schema_name = ? and f.table_name = ? and f.layout_key = ?""",
        [raw_schema(spec.dataset), spec.name, _layout_key(spec)]).fetchone()
    return row[0] if row else None


def _layout_key(spec: TableSpec) -> str:
    """Changes when the documented columns or types change, so the table is then reloaded."""
    return hashlib.sha256(repr(spec.columns).encode()).hexdigest()[:16]
