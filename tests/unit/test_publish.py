"""Build folders: staging, atomic publish, the `latest` link, discard, ids and listing."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from ehrbench.errors import PublishError
from ehrbench.layout import MANIFEST
from ehrbench.manifest import InputFile, Manifest
from ehrbench.publish import (
    discard,
    latest_build_id,
    new_build_id,
    publish,
    published_builds,
    staging_dir,
)
from ehrbench.settings import BuildParameters


def _manifest(build_id: str, seed: int = 0) -> Manifest:
    return Manifest(
        build_id=build_id,
        created_at=datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC),
        parameters=BuildParameters(seed=seed),
        seed=seed,
        sources={"mimic_iv": {"edition": "demo", "version": "2.2", "dir": "/raw/mimic", "origin": "local"}},
        packages={"duckdb": "1.5.6"},
        inputs=[InputFile(dataset="mimic_iv", table="patients", path="/raw/mimic/hosp/patients.csv.gz",
                          required=True, status="verified", verification="verified", sha256="a" * 64,
                          expected_sha256="a" * 64, rows=100, action="loaded")],
        raw_row_counts={"raw_mimic_iv.patients": 100},
        built_row_counts={"main.patients": 94},
    )


def _stage(benchmarks, build_id, content="x"):
    folder = staging_dir(benchmarks, build_id)
    (folder / "questions.jsonl").write_text(content)
    return folder


def test_publish_renames_staging_folder_and_points_latest_at_it(tmp_path):
    benchmarks = tmp_path / "benchmarks"
    folder = _stage(benchmarks, "b1", "q1")
    assert folder == benchmarks / "b1.tmp" and folder.is_dir()
    manifest = _manifest("b1", seed=7)

    final = publish(benchmarks, manifest)

    assert final == benchmarks / "b1"
    assert not folder.exists()
    assert (final / "questions.jsonl").read_text() == "q1"
    latest = benchmarks / "latest"
    assert latest.is_symlink() and os.readlink(latest) == "b1"  # relative
    assert latest.resolve() == final.resolve()
    assert latest_build_id(benchmarks) == "b1"
    assert Manifest.model_validate_json((final / MANIFEST).read_text()) == manifest
    assert sorted(p.name for p in benchmarks.iterdir()) == ["b1", "latest"]  # no leftover link temp


def test_latest_survives_moving_the_data_folder(tmp_path):
    benchmarks = tmp_path / "data" / "benchmarks"
    _stage(benchmarks, "b1", "q1")
    publish(benchmarks, _manifest("b1"))
    moved = tmp_path / "moved"
    (tmp_path / "data").rename(moved)
    assert (moved / "benchmarks" / "latest" / "questions.jsonl").read_text() == "q1"


def test_second_build_switches_latest(tmp_path):
    benchmarks = tmp_path / "benchmarks"
    _stage(benchmarks, "b1", "q1")
    publish(benchmarks, _manifest("b1"))
    _stage(benchmarks, "b2", "q2")
    publish(benchmarks, _manifest("b2"))
    assert latest_build_id(benchmarks) == "b2"
    assert (benchmarks / "latest" / "questions.jsonl").read_text() == "q2"
    assert (benchmarks / "b1" / "questions.jsonl").read_text() == "q1"  # the old build is untouched


def test_discard_removes_staging_and_leaves_latest(tmp_path):
    benchmarks = tmp_path / "benchmarks"
    _stage(benchmarks, "b1")
    publish(benchmarks, _manifest("b1"))
    _stage(benchmarks, "b2")
    discard(benchmarks, "b2")
    assert not (benchmarks / "b2.tmp").exists() and not (benchmarks / "b2").exists()
    assert latest_build_id(benchmarks) == "b1"
    discard(benchmarks, "never-staged")  # nothing to remove is not an error


def test_publish_never_overwrites(tmp_path):
    benchmarks = tmp_path / "benchmarks"
    _stage(benchmarks, "b1", "first")
    publish(benchmarks, _manifest("b1"))
    (benchmarks / "b1.tmp").mkdir()  # a second staging folder under the same id
    (benchmarks / "b1.tmp" / "questions.jsonl").write_text("second")
    with pytest.raises(PublishError) as info:
        publish(benchmarks, _manifest("b1"))
    assert str(benchmarks / "b1") in str(info.value) and "never overwritten" in str(info.value)
    assert (benchmarks / "b1" / "questions.jsonl").read_text() == "first"


def test_publish_without_staging_folder(tmp_path):
    benchmarks = tmp_path / "benchmarks"
    benchmarks.mkdir()
    with pytest.raises(PublishError) as info:
        publish(benchmarks, _manifest("ghost"))
    assert str(benchmarks / "ghost.tmp") in str(info.value) and "missing" in str(info.value)
    assert latest_build_id(benchmarks) is None


def test_staging_dir_refuses_an_existing_folder(tmp_path):
    benchmarks = tmp_path / "benchmarks"
    staging_dir(benchmarks, "b1")
    with pytest.raises(FileExistsError):
        staging_dir(benchmarks, "b1")


def test_new_build_id_is_a_utc_timestamp_with_a_counter(tmp_path):
    benchmarks = tmp_path / "benchmarks"
    now = datetime(2026, 11, 21, 12, 34, 56, tzinfo=UTC)
    assert new_build_id(benchmarks, now) == "20261121T123456Z"
    staging_dir(benchmarks, "20261121T123456Z")  # taken while staging
    assert new_build_id(benchmarks, now) == "20261121T123456Z-2"
    (benchmarks / "20261121T123456Z-2").mkdir()  # taken by a published build
    assert new_build_id(benchmarks, now) == "20261121T123456Z-3"
    assert new_build_id(benchmarks, datetime(2026, 11, 21, 12, 34, 57, tzinfo=UTC)) == "20261121T123457Z"


def test_published_builds_lists_only_published_folders(tmp_path):
    benchmarks = tmp_path / "benchmarks"
    assert published_builds(benchmarks) == []
    for build_id in ("b2", "b1"):
        _stage(benchmarks, build_id)
        publish(benchmarks, _manifest(build_id))
    _stage(benchmarks, "b3")  # still staging
    (benchmarks / "b3.tmp" / MANIFEST).write_text(_manifest("b3").model_dump_json())
    (benchmarks / "broken").mkdir()
    (benchmarks / "broken" / MANIFEST).write_text("{not json")
    (benchmarks / "stray").mkdir()  # no manifest
    assert [m.build_id for m in published_builds(benchmarks)] == ["b1", "b2"]
