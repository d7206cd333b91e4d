"""The command line as a user runs it (subprocesses): listing builds and failing fast."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ehrbench.publish import publish, staging_dir

from .test_publish import _manifest

EHRBENCH = str(Path(sys.executable).with_name("ehrbench"))


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "EHRBENCH_"))}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_PROFILES_PATH=str(tmp_path / "profiles.toml"),
               DO_NOT_TRACK="1", **extra)
    return env


def test_builds_lists_published_builds_oldest_first_and_marks_latest(tmp_path):
    benchmarks = tmp_path / "data" / "benchmarks"
    for n, build_id in enumerate(["20261120T100000Z", "20261121T100000Z"]):
        manifest = _manifest(build_id, seed=n + 3)
        manifest.created_at = datetime(2026, 11, 20, tzinfo=UTC) + timedelta(days=n)
        staging_dir(benchmarks, build_id)
        publish(benchmarks, manifest)
    staging_dir(benchmarks, "20261122T100000Z")  # an unfinished build is not listed

    result = subprocess.run([EHRBENCH, "builds", "--data-dir", str(tmp_path / "data")], env=_env(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if "2026112" in line]
    assert len(rows) == 2
    assert "20261120T100000Z" in rows[0] and "* 20261121T100000Z" in rows[1]
    assert "20261122T100000Z" not in result.stdout
    assert "mimic_iv demo 2.2" in rows[0]


def test_builds_on_an_empty_data_dir_says_so(tmp_path):
    result = subprocess.run([EHRBENCH, "builds", "--data-dir", str(tmp_path)], env=_env(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    assert "no published builds" in result.stderr


def test_build_with_an_unreachable_prefect_api_is_a_one_line_error(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/api"
    result = subprocess.run([EHRBENCH, "build", "--data-dir", str(tmp_path / "data")],
                            env=_env(tmp_path, PREFECT_API_URL=url), capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("ehrbench: error:")]
    assert len(errors) == 1 and url in errors[0] and "make server" in errors[0]
    assert not (tmp_path / "data" / "benchmarks").exists()


def test_build_with_a_broken_recipe_file_fails_before_any_stage(tmp_path):
    recipes = tmp_path / "recipes.yaml"
    recipes.write_text("tasks:\n  - id: mine\n    recipes:\n      - {family: impossible_values, subtypes: [typo], "
                       "count: 1}\n")
    for path, expected in ((recipes, "no sub-type 'typo'"), (tmp_path / "absent.yaml", "no recipe file")):
        result = subprocess.run([EHRBENCH, "build", "--data-dir", str(tmp_path / "data"), "--dq-recipes", str(path)],
                                env=_env(tmp_path), capture_output=True, text=True, timeout=120)
        assert result.returncode == 2, result.stderr
        errors = [line for line in result.stderr.splitlines() if line.startswith("ehrbench: error:")]
        assert len(errors) == 1 and str(path) in errors[0] and expected in errors[0], result.stderr
    assert not (tmp_path / "data").exists()


def test_report_without_runs_or_with_an_unknown_run_is_a_one_line_error(tmp_path):
    data_dir = tmp_path / "data"
    result = subprocess.run([EHRBENCH, "report", "--data-dir", str(data_dir)], env=_env(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().startswith("ehrbench: error:") and "no evaluation runs" in result.stderr
    (data_dir / "results" / "run_id=other").mkdir(parents=True)
    result = subprocess.run([EHRBENCH, "report", "--run-id", "nope", "--out", str(tmp_path / "site"), "--data-dir",
                             str(data_dir)], env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "run_id=nope: no results" in result.stderr
    assert not (tmp_path / "site").exists()
