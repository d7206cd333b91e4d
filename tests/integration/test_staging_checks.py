"""Real dbt and Great Expectations runs on a real warehouse file: the checks pass on the demo and
catch a deliberately broken copy, with messages that name the failing model/column."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import duckdb
import pytest

from ehrbench.errors import TransformError
from ehrbench.sources import release_for
from ehrbench.sources.ingest import ingest_release
from ehrbench.transform import run_dbt, staging_selection
from ehrbench.validation import load_suite, validate_suite
from ehrbench.warehouse import connect

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def staged_warehouse(mimic_demo_dir, eicu_demo_dir, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("warehouse")
    warehouse = root / "warehouse.duckdb"
    with connect(warehouse) as con:
        for dataset, folder in (("mimic_iv", mimic_demo_dir), ("eicu", eicu_demo_dir)):
            ingest_release(con, release_for(dataset), folder, origin="local")
    run = run_dbt(["build", "--select", *staging_selection()], warehouse=warehouse, work_dir=root / "dbt")
    assert run.count("error") == 0 and run.count("fail") == 0
    assert run.count("success") == 26  # one view per staged table
    assert run.count("warn") == 1  # not_empty on the absent optional eICU vitalPeriodic
    return warehouse


def test_staging_suites_pass_on_the_demo(staged_warehouse):
    for name in ("staging_mimic_iv", "staging_eicu"):
        result = validate_suite(load_suite(REPO / "expectations" / f"{name}.json"), staged_warehouse,
                                absent_sources=["vitalperiodic", "nursecharting"])
        assert result.success, result.failed
        expectations = sum(len(spec["expectations"]) for spec in load_suite(
            REPO / "expectations" / f"{name}.json")["tables"].values())
        assert result.evaluated == expectations - len(result.skipped) >= 25
        assert all(o.error is None for o in result.outcomes)  # every expectation really ran on DuckDB


def broken_copy(warehouse: Path, tmp_path: Path, *statements: str) -> Path:
    copy = tmp_path / "broken" / warehouse.name  # same file name: dbt's views name the catalog after it
    copy.parent.mkdir()
    shutil.copy(warehouse, copy)
    con = duckdb.connect(str(copy))
    try:
        for statement in statements:
            con.execute(statement)
    finally:
        con.close()
    return copy


def test_dbt_failure_names_the_failing_test(staged_warehouse, tmp_path):
    copy = broken_copy(staged_warehouse, tmp_path,
                       "insert into raw_mimic_iv.patients select * from raw_mimic_iv.patients limit 1")
    with pytest.raises(TransformError) as caught:
        run_dbt(["build", "--select", *staging_selection()], warehouse=copy, work_dir=tmp_path / "dbt")
    # the patients' column tests run as one node; the message names the one that failed: one duplicated subject_id
    assert re.search(r"column_checks_stg_mimic_iv__patients\S*: unique on subject_id: 1\b", str(caught.value))


def test_gx_catches_what_dbt_does_not_test(staged_warehouse, tmp_path):
    # Times outside MIMIC-IV's shifted range, sodium in the wrong unit, an ICU stay that ends before it starts and
    # eICU clock times that are no times.
    copy = broken_copy(staged_warehouse, tmp_path,
                       "update raw_mimic_iv.admissions set admittime = admittime - interval 200 year "
                       "where hadm_id in (select hadm_id from raw_mimic_iv.admissions limit 3)",
                       "update raw_mimic_iv.labevents set valuenum = valuenum / 10 where itemid = 50983",
                       "update raw_mimic_iv.icustays set outtime = intime - interval 1 hour "
                       "where stay_id in (select stay_id from raw_mimic_iv.icustays limit 1)",
                       "update raw_eicu.patient set hospitaladmittime24 = '25:61:00' "
                       "where patientunitstayid in (select patientunitstayid from raw_eicu.patient limit 2)")
    mimic = validate_suite(load_suite(REPO / "expectations" / "staging_mimic_iv.json"), copy)
    failed = {(o.table, o.column, o.expectation) for o in mimic.failed}
    assert failed == {("stg_mimic_iv__admissions", "admittime", "expect_column_values_to_be_between"),
                      ("stg_mimic_iv__labevents", "valuenum where itemid == 50983",
                       "expect_column_values_to_be_between"),
                      ("stg_mimic_iv__icustays", "outtime, intime", "expect_column_pair_values_a_to_be_greater_than_b")}
    assert next(o for o in mimic.failed if o.column == "admittime").unexpected_count == 3

    eicu = validate_suite(load_suite(REPO / "expectations" / "staging_eicu.json"), copy,
                          absent_sources=["vitalperiodic", "nursecharting"])
    assert [(o.table, o.expectation) for o in eicu.failed] == [("stg_eicu__patient", "unexpected_rows_expectation")]
