"""dbt's parse of the project is kept across work folders (ehrbench.dbt_parse_cache): a real dbt, a throwaway
project, three work folders. The second, a warehouse of the same name in another data directory, starts from the first
one's parse; a warehouse of another name (dbt-duckdb names the database after the file, and the parsed nodes keep that
name) does not."""

from __future__ import annotations

import shutil

import pytest
import yaml

from ehrbench.dbt_parse_cache import PARSE_FILE, keep_parse, parse_key, restore_parse
from ehrbench.transform import PROJECT_DIR, run_dbt

FULL_PARSE = "Unable to do partial parsing"  # dbt's log line when it parses everything


@pytest.fixture
def project(tmp_path):
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(yaml.safe_dump({
        "name": "parsed", "version": "1.0", "profile": "ehrbench", "config-version": 2}))
    shutil.copy(PROJECT_DIR / "profiles.yml", project)
    (project / "models" / "one.sql").write_text("select {{ var('n') }} as n")
    return project


def full_parses(work_dir) -> int:
    return (work_dir / "logs" / "dbt.log").read_text().count(FULL_PARSE)


@pytest.mark.integration
def test_a_new_work_folder_starts_from_the_kept_parse(project, tmp_path, monkeypatch):
    monkeypatch.setenv("EHRBENCH_CACHE_DIR", str(tmp_path / "cache"))
    first, second, other = tmp_path / "first", tmp_path / "second", tmp_path / "other"
    for data_dir in ("a", "b"):
        (tmp_path / data_dir).mkdir()
    run_dbt(["build"], warehouse=tmp_path / "a" / "warehouse.duckdb", work_dir=first, vars={"n": 1},
            project_dir=project)
    run_dbt(["build"], warehouse=tmp_path / "b" / "warehouse.duckdb", work_dir=second, vars={"n": 1},
            project_dir=project)
    run_dbt(["build"], warehouse=tmp_path / "a" / "elsewhere.duckdb", work_dir=other, vars={"n": 1},
            project_dir=project)
    assert (full_parses(first), full_parses(second), full_parses(other)) == (1, 0, 1)


def test_the_key_separates_what_dbts_own_check_does_not(tmp_path):
    key = parse_key(PROJECT_DIR, tmp_path / "warehouse.duckdb", {"seed": 0})
    assert key == parse_key(PROJECT_DIR, tmp_path / "elsewhere" / "warehouse.duckdb", {"seed": 0})  # same database
    assert key != parse_key(PROJECT_DIR, tmp_path / "other.duckdb", {"seed": 0})
    assert key != parse_key(PROJECT_DIR, tmp_path / "warehouse.duckdb", {"seed": 1})
    assert key != parse_key(tmp_path / "checkout" / "dbt_project", tmp_path / "warehouse.duckdb", {"seed": 0})


def test_a_target_folder_keeps_its_own_parse(tmp_path):
    cache, target = tmp_path / "cache", tmp_path / "target"
    assert not restore_parse(cache, "k", target)  # nothing kept yet
    target.mkdir()
    (target / PARSE_FILE).write_bytes(b"first")
    keep_parse(cache, "k", target)
    (target / PARSE_FILE).write_bytes(b"newer")
    assert not restore_parse(cache, "k", target)  # dbt's own file is newer than the cache's
    assert (target / PARSE_FILE).read_bytes() == b"newer"
    assert restore_parse(cache, "k", tmp_path / "fresh")
    assert (tmp_path / "fresh" / PARSE_FILE).read_bytes() == b"first"
    assert [p.name for p in (cache / "k").iterdir()] == [PARSE_FILE]  # no temporary file left behind
