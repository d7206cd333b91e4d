"""The EHRBENCH_* environment variables: one typed model (ehrbench.environment) names every one the project reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ehrbench.environment import Environment, environment, variable

REPO = Path(__file__).resolve().parents[2]
# Set by ehrbench for a child process, not read: dbt's profiles.yml reads the warehouse path (ehrbench.transform).
WRITTEN_FOR_DBT = {"EHRBENCH_WAREHOUSE"}
# Read by the test suite only (tests/conftest.py): where the demo data lives.
TESTS_ONLY = {"EHRBENCH_SHARED_DATA"}


def _mentioned_variables() -> set[str]:
    files = [REPO / "Makefile", REPO / "prefect.yaml", *(REPO / "src").rglob("*.py"), *(REPO / "flows").rglob("*.py")]
    return {name for path in files for name in re.findall(r"\bEHRBENCH_[A-Z0-9_]*[A-Z0-9]\b", path.read_text())}


def test_every_variable_the_project_mentions_is_a_field_of_the_model():
    fields = {variable(name) for name in Environment.model_fields}
    mentioned = _mentioned_variables() - WRITTEN_FOR_DBT - TESTS_ONLY
    assert "EHRBENCH_DATA_DIR" in mentioned and "EHRBENCH_MIMIC_IV_DIR" in mentioned  # the scan finds them
    assert mentioned - fields == set(), "EHRBENCH_* variables read outside ehrbench.environment's model"


def test_values_come_from_the_process_environment_at_call_time(monkeypatch):
    monkeypatch.setenv("EHRBENCH_EICU_DIR", "/releases/eicu")
    monkeypatch.setenv("EHRBENCH_MIMIC_IV_DIR", "")  # the Makefile exports an empty value when none was given
    monkeypatch.setenv("EHRBENCH_MIMIC_IV_URL", "http://mirror/mimic")
    env = environment()
    assert env.eicu_dir == Path("/releases/eicu")
    assert env.mimic_iv_dir is None
    assert env.release_url("mimic_iv") == "http://mirror/mimic" and env.release_url("eicu") is None
    monkeypatch.setenv("EHRBENCH_EICU_DIR", "/elsewhere")
    assert environment().eicu_dir == Path("/elsewhere")  # not cached at import


def test_a_given_mapping_is_read_alone(monkeypatch):
    monkeypatch.setenv("EHRBENCH_PARAPHRASE_MODEL", "openai:from-the-process")
    env = environment({"EHRBENCH_DATA_DIR": "/d", "EHRBENCH_PARAPHRASE_CACHE": "", "OTHER": "x"})
    assert env.data_dir == Path("/d") and env.paraphrase_cache is None
    assert env.paraphrase_model is None  # the process's variable does not leak into a given mapping


def test_defaults_and_variable_names():
    env = environment({})
    assert env.data_dir == Path("data") and env.report_dir == REPO / "reports" / "site"
    assert variable("eicu_dir") == "EHRBENCH_EICU_DIR"
    with pytest.raises(KeyError, match="no EHRBENCH_ variable"):
        variable("warehouse")
