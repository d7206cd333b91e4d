"""Write a build's MEDS datasets (docs/benchmarks.md#meds-export) from the dbt models of models/meds/, each file checked
against the `meds` package's schemas before it is written.

    meds/<timeline>/data/<shard>.parquet              the events (DataSchema), at most EVENTS_PER_SHARD a shard (a
                                                      subject's all in one), sorted
    meds/<timeline>/metadata/codes.parquet            every code of the data, described (CodeMetadataSchema)
    meds/<timeline>/metadata/subject_splits.parquet   the seeded train / tuning / held_out splits (SubjectSplitSchema)
    meds/<timeline>/metadata/dataset.json             name, versions, ETL, creation time (DatasetMetadataSchema)

`raw` is MIMIC-IV's own timeline, `shifted` the build's (the ehrsql2024 and renamed databases' patients and times);
`eicu` is eICU-CRD on the eICU-MEDS ETL's pseudo-timeline (eICU has no dates).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from importlib.metadata import version
from pathlib import Path

import meds
import pyarrow as pa
import pyarrow.parquet as pq
from flexible_schema.exceptions import SchemaValidationError, TableValidationError

from ehrbench.errors import ValidationError
from ehrbench.layout import BuildLayout, write_once
from ehrbench.warehouse import open_duckdb

# each dataset's dbt schema (models/meds/<source>/) and its events model; the codes and splits are the schema's
TIMELINES = {"raw": ("meds__mimic_iv", "raw_events"), "shifted": ("meds__mimic_iv", "shifted_events"),
             "eicu": ("meds__eicu", "events")}
# Subjects are never split, so a shard holds more only for one subject with more events. A shard goes from DuckDB
# to its file in batches of BATCH_EVENTS (about 270 bytes an event in memory: bench/meds.py), each checked.
EVENTS_PER_SHARD = 5_000_000
BATCH_EVENTS = 1_000_000
EVENT_COLUMNS = ("subject_id", "time", "code", "numeric_value", "text_value", "hadm_id", "icustay_id")
SOURCE_ID_COLUMNS = ["hadm_id", "icustay_id"]  # joins back to MIMIC-IV (dataset.json raw_source_id_columns)
EVENT_ORDER = "subject_id, time nulls first, code, numeric_value nulls first, text_value nulls first"


@dataclass(frozen=True)
class MedsDataset:
    """What one timeline's export holds (the manifest's `meds.<timeline>`)."""

    timeline: str
    subjects: int
    events: int
    static_events: int
    codes: int
    shards: int
    splits: dict[str, int]
    first_time: str | None
    last_time: str | None
    files: list[str]


def export_meds(warehouse: Path, build_dir: Path, timeline: str, *, dataset_name: str, dataset_version: str,
                license: str, created_at: datetime) -> MedsDataset:
    """Write `meds/<timeline>/` of the build from the warehouse's models of its TIMELINES schema; raises ValidationError
    naming the file and the schema's complaint when a table does not conform."""
    root = BuildLayout(build_dir).meds(timeline)
    schema, events = TIMELINES[timeline]
    events_table = f"{schema}.{events}"
    con = open_duckdb(str(warehouse), read_only=True)
    try:
        missing = con.execute(f"select count(distinct code) from {events_table} where code not in "
                              f"(select code from {schema}.codes)").fetchone()[0]
        if missing:  # before anything is written
            raise ValidationError(f"{schema}.codes lacks {missing} code(s) of {events_table}; MEDS requires every "
                                  "code of the data in metadata/codes.parquet")
        counts = con.execute(f"select subject_id, count(*) from {events_table} group by 1 order by 1").fetchall()
        files = []
        for shard, (first, last) in enumerate(shard_bounds(counts, EVENTS_PER_SHARD)):
            data = con.execute(f"select {', '.join(EVENT_COLUMNS)} from {events_table} where subject_id between ? "
                               f"and ? order by {EVENT_ORDER}", [first, last]).to_arrow_reader(BATCH_EVENTS)
            files.append(write_checked_batches(root / meds.data_subdirectory / f"{shard}.parquet", meds.DataSchema,
                                               data))
        codes = con.execute(f"select code, description, parent_codes from {schema}.codes where code in "
                            f"(select distinct code from {events_table}) order by code").to_arrow_table()
        files.append(write_checked(root / meds.code_metadata_filepath, meds.CodeMetadataSchema, codes))
        splits = con.execute(f"select subject_id, split from {schema}.subject_splits where subject_id in "
                             f"(select subject_id from {events_table}) order by subject_id").to_arrow_table()
        files.append(write_checked(root / meds.subject_splits_filepath, meds.SubjectSplitSchema, splits))
        static, first, last = con.execute(
            f"select count(*) filter (where time is null), strftime(min(time), '%Y-%m-%d %H:%M:%S'), "
            f"strftime(max(time), '%Y-%m-%d %H:%M:%S') from {events_table}").fetchone()
    finally:
        con.close()
    metadata = {"dataset_name": dataset_name, "dataset_version": dataset_version, "etl_name": "ehrbench",
                "etl_version": version("ehrbench"), "meds_version": meds.__version__,
                "created_at": created_at.isoformat(), "license": license, "raw_source_id_columns": SOURCE_ID_COLUMNS}
    check_table(meds.DatasetMetadataSchema, metadata, root / meds.dataset_metadata_filepath)
    path = root / meds.dataset_metadata_filepath
    write_once(path, lambda tmp: tmp.write_text(json.dumps(metadata, indent=2) + "\n"))
    files.append(path)
    split_counts = dict(sorted(Counter(splits.column("split").to_pylist()).items()))
    return MedsDataset(timeline, len(counts), sum(n for _, n in counts), static, codes.num_rows, len(files) - 3,
                       split_counts, first, last, [str(f.relative_to(build_dir)) for f in files])


def shard_bounds(counts: list[tuple[int, int]], limit: int) -> list[tuple[int, int]]:
    """(first, last) subject of each shard: consecutive subjects (`counts`: (subject, events), sorted) up to `limit`
    events a shard, a subject never split."""
    bounds: list[tuple[int, int]] = []
    first, size = None, 0
    for index, (subject, events) in enumerate(counts):
        if first is not None and size + events > limit:
            bounds.append((first, counts[index - 1][0]))
            first, size = None, 0
        if first is None:
            first = subject
        size += events
    if first is not None:
        bounds.append((first, counts[-1][0]))
    return bounds


def write_checked(path: Path, schema: type, table: pa.Table) -> Path:
    """`table` aligned to `schema` (its column types: e.g. text_value as large_string), checked, then written."""
    aligned = check_table(schema, table, path)
    write_once(path, lambda tmp: pq.write_table(aligned, tmp))
    return path


def write_checked_batches(path: Path, schema: type, batches: pa.RecordBatchReader) -> Path:
    """`write_checked` for a stream (e.g. DuckDB's `to_arrow_reader`): each batch aligned, checked and appended, so
    that memory holds one batch, not the table. No batch: a file of no rows."""
    def write(tmp: Path) -> None:
        writer = None
        try:
            for batch in batches:
                aligned = check_table(schema, pa.Table.from_batches([batch]), path)
                writer = writer or pq.ParquetWriter(tmp, aligned.schema)
                writer.write_table(aligned)
            if writer is None:
                empty = check_table(schema, batches.schema.empty_table(), path)
                pq.write_table(empty, tmp)
        finally:
            if writer is not None:
                writer.close()

    write_once(path, write)
    return path


def check_table(schema: type, value, path: Path):
    try:
        aligned = schema.align(value) if isinstance(value, pa.Table) else value
        schema.validate(aligned)
    except (SchemaValidationError, TableValidationError) as exc:
        cause = f": {exc.__cause__}" if exc.__cause__ else ""
        raise ValidationError(f"{path}: does not conform to meds.{schema.__name__} ({exc}{cause})") from None
    return aligned

