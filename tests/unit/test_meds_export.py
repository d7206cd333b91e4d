"""The MEDS writer on a small hand-made warehouse (the dbt models' tables, by hand): the files the standard names, each
valid under the `meds` package's schemas, subjects never split over shards, and a clear error for data the schemas or
the code metadata reject. The seeded subject splits."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import duckdb
import meds
import pyarrow.parquet as pq
import pytest

from ehrbench.errors import ValidationError
from ehrbench.meds import export
from ehrbench.meds.export import export_meds
from ehrbench.meds.splits import assign_splits


def _warehouse(path, *, codes=("GENDER//F", "MEDS_BIRTH", "LAB//RESULT//50912//mg/dL"), subjects=(1, 2, 3)):
    con = duckdb.connect(str(path))
    con.execute("create schema meds__mimic_iv")
    con.execute("""create table meds__mimic_iv.raw_events (subject_id bigint, time timestamp, code varchar,
                   numeric_value float, text_value varchar, hadm_id bigint, icustay_id bigint)""")
    for subject in subjects:
        con.execute("insert into meds__mimic_iv.raw_events values "
                    "(?, null, 'GENDER//F', null, null, null, null), "
                    "(?, timestamp '2100-01-01', 'MEDS_BIRTH', null, null, null, null), "
                    "(?, timestamp '2150-03-04 10:00:00', 'LAB//RESULT//50912//mg/dL', 1.25, '1.25', 20, null)",
                    [subject] * 3)
    con.execute("create table meds__mimic_iv.codes (code varchar, description varchar, parent_codes varchar[])")
    con.executemany("insert into meds__mimic_iv.codes values (?, ?, ?)",
                    [(code, f"about {code}", None) for code in codes])
    con.execute("create table meds__mimic_iv.subject_splits (subject_id bigint, split varchar)")
    con.executemany("insert into meds__mimic_iv.subject_splits values (?, ?)",
                    [(s, split) for s, split in assign_splits(list(subjects), 0).items()])
    con.close()
    return path


def _export(warehouse, build):
    return export_meds(warehouse, build, "raw", dataset_name="MIMIC-IV demo", dataset_version="2.2",
                       license="ODbL-1.0", created_at=datetime(2026, 11, 27, tzinfo=UTC))


def test_the_files_are_the_standards_and_valid_under_its_schemas(tmp_path, monkeypatch):
    monkeypatch.setattr(export, "EVENTS_PER_SHARD", 6)  # 3 events a subject: two subjects a shard
    monkeypatch.setattr(export, "BATCH_EVENTS", 4)  # written in batches: the first shard in two
    dataset = _export(_warehouse(tmp_path / "w.duckdb"), tmp_path / "build")
    root = tmp_path / "build" / "meds" / "raw"
    assert [pq.read_metadata(root / "data" / f"{i}.parquet").num_row_groups for i in (0, 1)] == [2, 1]
    assert dataset.files == ["meds/raw/data/0.parquet", "meds/raw/data/1.parquet", "meds/raw/metadata/codes.parquet",
                             "meds/raw/metadata/subject_splits.parquet", "meds/raw/metadata/dataset.json"]
    shards = [pq.read_table(root / "data" / f"{i}.parquet") for i in (0, 1)]
    for shard in shards:
        meds.DataSchema.validate(shard)  # raises when not
        assert shard.schema.field("text_value").type == meds.DataSchema.schema().field("text_value").type
    assert [sorted(set(s.column("subject_id").to_pylist())) for s in shards] == [[1, 2], [3]]  # never split
    first = shards[0].to_pylist()
    assert [row["code"] for row in first[:3]] == ["GENDER//F", "MEDS_BIRTH", "LAB//RESULT//50912//mg/dL"]
    meds.CodeMetadataSchema.validate(pq.read_table(root / "metadata" / "codes.parquet"))
    meds.SubjectSplitSchema.validate(pq.read_table(root / "metadata" / "subject_splits.parquet"))
    metadata = json.loads((root / "metadata" / "dataset.json").read_text())
    meds.DatasetMetadataSchema.validate(metadata)
    assert (metadata["etl_name"], metadata["meds_version"], metadata["raw_source_id_columns"]) == (
        "ehrbench", meds.__version__, ["hadm_id", "icustay_id"])
    assert (dataset.subjects, dataset.events, dataset.static_events, dataset.codes, dataset.shards) == (3, 9, 3, 3, 2)


def test_a_code_without_metadata_is_refused_naming_the_table(tmp_path):
    warehouse = _warehouse(tmp_path / "w.duckdb", codes=("GENDER//F", "MEDS_BIRTH"))
    with pytest.raises(ValidationError, match=r"meds__mimic_iv\.codes lacks 1 code\(s\) of meds__mimic_iv\.raw_events"):
        _export(warehouse, tmp_path / "build")


def test_data_the_schema_rejects_is_refused_naming_the_file(tmp_path):
    warehouse = _warehouse(tmp_path / "w.duckdb")
    con = duckdb.connect(str(warehouse))
    con.execute("insert into meds__mimic_iv.raw_events values "
                "(4, timestamp '2150-01-01', null, null, null, null, null)")
    con.close()
    with pytest.raises(ValidationError, match=r"meds/raw/data/0\.parquet: does not conform to meds\.DataSchema"):
        _export(warehouse, tmp_path / "build")
    assert not (tmp_path / "build" / "meds" / "raw" / "data" / "0.parquet").exists()


def test_shards_hold_whole_subjects_up_to_the_limit():
    counts = [(1, 3), (2, 3), (3, 7), (4, 1), (5, 1)]
    assert export.shard_bounds(counts, 6) == [(1, 2), (3, 3), (4, 5)]  # subject 3 alone is over: never split
    assert export.shard_bounds(counts, 100) == [(1, 5)]
    assert export.shard_bounds([], 6) == []


def test_splits_are_80_10_10_by_subject_and_drawn_with_the_seed():
    subjects = list(range(1000, 1100))
    splits = assign_splits(subjects, seed=0)
    assert list(splits) == subjects
    counts = {name: sum(1 for s in splits.values() if s == name) for name in ("train", "tuning", "held_out")}
    assert counts == {"train": 80, "tuning": 10, "held_out": 10}
    assert assign_splits(list(reversed(subjects)), seed=0) == splits  # the input's order does not matter
    assert assign_splits(subjects, seed=1) != splits
    assert set(assign_splits(subjects[:7], 0)) == set(subjects[:7])
    assert set(assign_splits(subjects[:7], 0).values()) <= {"train", "tuning", "held_out"}
