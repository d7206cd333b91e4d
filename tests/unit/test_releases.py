"""Release layouts (package data) checked against what PhysioNet publishes."""

from __future__ import annotations

import gzip

import pytest

from ehrbench.sources.checksums import read_checksums
from ehrbench.sources.releases import CHECKSUM_FILE, DATASETS, release_for, table_specs

DUCKDB_TYPES = {"INTEGER", "SMALLINT", "BIGINT", "DOUBLE", "VARCHAR", "TIMESTAMP", "DATE", "BOOLEAN"}


@pytest.fixture(autouse=True)
def _no_url_overrides(monkeypatch):
    for dataset in DATASETS:
        monkeypatch.delenv(f"EHRBENCH_{dataset.upper()}_URL", raising=False)


def test_mimic_iv_layout_has_hosp_and_icu_modules():
    release = release_for("mimic_iv")
    paths = {spec.name: spec.path for spec in release.tables}
    assert paths["patients"] == "hosp/patients.csv.gz"
    assert paths["admissions"] == "hosp/admissions.csv.gz"
    assert paths["chartevents"] == "icu/chartevents.csv.gz"
    assert paths["icustays"] == "icu/icustays.csv.gz"
    assert all(path.startswith(("hosp/", "icu/")) and path.endswith(".csv.gz") for path in paths.values())
    required = {spec.name for spec in release.tables if spec.required}
    assert {"patients", "admissions", "icustays", "chartevents", "labevents", "diagnoses_icd",
            "prescriptions", "inputevents", "outputevents", "d_items", "d_labitems"} <= required
    assert not release.table("omr").required


def test_mimic_iv_columns_follow_the_official_ddl():
    patients = release_for("mimic_iv").table("patients")
    assert patients.columns == (("subject_id", "INTEGER"), ("gender", "VARCHAR"),
                                ("anchor_age", "SMALLINT"), ("anchor_year", "SMALLINT"),
                                ("anchor_year_group", "VARCHAR"), ("dod", "DATE"))
    assert patients.qualified_name == "raw_mimic_iv.patients"
    admissions = dict(release_for("mimic_iv").table("admissions").columns)
    assert admissions["admittime"] == "TIMESTAMP"
    assert admissions["hadm_id"] == "INTEGER"


def test_eicu_paths_are_camel_case_and_table_names_lower_case():
    release = release_for("eicu")
    spec = release.table("intakeoutput")
    assert spec.path == "intakeOutput.csv.gz"
    assert spec.qualified_name == "raw_eicu.intakeoutput"
    assert release.table("nursecharting").path == "nurseCharting.csv.gz"
    assert all(s.name == s.name.lower() and "/" not in s.path for s in release.tables)
    assert {"patient", "lab", "intakeoutput", "diagnosis", "treatment"} <= {s.name for s in release.tables
                                                                         if s.required}


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_table_has_unique_columns_of_known_types(dataset):
    specs = table_specs(dataset)
    assert len({s.name for s in specs}) == len(specs)
    for spec in specs:
        names = [name for name, _ in spec.columns]
        assert names, spec.name
        assert len(set(names)) == len(names), f"{spec.name} repeats a column"
        assert {kind for _, kind in spec.columns} <= DUCKDB_TYPES, spec.name


def test_official_urls_and_slugs():
    assert release_for("mimic_iv").base_url == "https://physionet.org/files/mimic-iv-demo/2.2/"
    assert release_for("mimic_iv", "full").base_url == "https://physionet.org/files/mimiciv/2.2/"
    assert release_for("eicu").base_url == "https://physionet.org/files/eicu-crd-demo/2.0.1/"
    assert release_for("eicu", "full").base_url == "https://physionet.org/files/eicu-crd/2.0/"
    assert release_for("mimic_iv").slug == "mimic-iv-demo-2.2"
    assert release_for("eicu", "full").slug == "eicu-full-2.0"
    assert not release_for("mimic_iv").credentialed
    assert release_for("mimic_iv", "full").credentialed


def test_url_environment_variable_overrides_base_url(monkeypatch):
    monkeypatch.setenv("EHRBENCH_MIMIC_IV_URL", "http://127.0.0.1:8123/mirror")
    full = release_for("mimic_iv", "full")
    assert full.base_url == "http://127.0.0.1:8123/mirror/"
    assert full.credentialed and full.version == "2.2"
    assert release_for("eicu").base_url == "https://physionet.org/files/eicu-crd-demo/2.0.1/"


def test_unknown_release_is_rejected():
    with pytest.raises(ValueError, match="mimic_iv/beta"):
        release_for("mimic_iv", "beta")
    with pytest.raises(KeyError, match="nonsense"):
        release_for("eicu").table("nonsense")


# --- package data against the real demo files (skipped without ../shared/data) -----------------

def _header(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.readline().rstrip("\r\n").split(",")


@pytest.mark.parametrize("dataset, fixture", [("mimic_iv", "mimic_demo_dir"), ("eicu", "eicu_demo_dir")])
def test_demo_file_headers_equal_the_documented_columns(dataset, fixture, request):
    root = request.getfixturevalue(fixture)
    checked = 0
    for spec in release_for(dataset).tables:
        path = root / spec.path
        if not path.exists():
            assert not spec.required, f"required {spec.path} is missing from the demo"
            continue
        # The ingest compares case-insensitively: the demo's procedureevents says ORIGINALAMOUNT.
        assert [c.strip('"').lower() for c in _header(path)] == [name for name, _ in spec.columns], spec.path
        checked += 1
    assert checked >= 29


@pytest.mark.parametrize("dataset, fixture", [("mimic_iv", "mimic_demo_dir"), ("eicu", "eicu_demo_dir")])
def test_demo_release_files_and_table_paths_agree(dataset, fixture, request):
    root = request.getfixturevalue(fixture)
    spec_paths = {spec.path for spec in release_for(dataset).tables}
    listed = {p for p in read_checksums(root / CHECKSUM_FILE) if p.endswith(".csv.gz")}
    present = {p.relative_to(root).as_posix() for p in root.rglob("*.csv.gz")}
    assert spec_paths <= listed, f"paths not in the official {CHECKSUM_FILE}: {spec_paths - listed}"
    assert present <= spec_paths, f"demo files without a table spec: {present - spec_paths}"
