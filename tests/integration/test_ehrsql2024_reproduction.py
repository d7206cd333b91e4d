"""Acceptance test of the ehrsql2024 profile: the MIMIC-IV demo rebuilt by dbt reproduces the published
EHRSQL-2024 validation answers when the published gold SQL runs on its SQLite export
(docs/benchmarks.md#ehrsql-2024-database)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ehrbench.ehrsql import format_answer, prepare_gold_sql
from ehrbench.export import export_schema
from ehrbench.profiles import BenchmarkDatabase
from ehrbench.sources import release_for
from ehrbench.sources.ingest import ingest_release
from ehrbench.transform import run_dbt
from ehrbench.warehouse import connect
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.integration

EHRSQL_2024 = SHARED_DATA / "ehrsql-2024" / "mimic_iv"
SCHEMA = "ehrsql2024__mimic_iv"
MIN_MATCH_RATE = 0.99


@pytest.fixture(scope="module")
def ehrsql2024_sqlite(mimic_demo_dir, tmp_path_factory) -> Path:
    if not EHRSQL_2024.is_dir():
        pytest.skip(f"EHRSQL-2024 data not found at {EHRSQL_2024}")
    root = tmp_path_factory.mktemp("ehrsql2024")
    warehouse = root / "warehouse.duckdb"
    with connect(warehouse) as con:
        ingest_release(con, release_for("mimic_iv"), mimic_demo_dir, origin="local")
    run = run_dbt(["build", "--select", "staging.mimic_iv", "ehrsql2024"], warehouse=warehouse,
                  work_dir=root / "dbt")
    assert run.count("error") == 0 and run.count("fail") == 0 and run.count("warn") == 0
    duckdb_path, sqlite_path = BenchmarkDatabase("ehrsql2024", "mimic_iv").files(root / "build")
    export_schema(warehouse, SCHEMA, duckdb_path, sqlite_path)  # the build's own export
    return sqlite_path


def test_cohort_is_the_published_one(ehrsql2024_sqlite):
    con = sqlite3.connect(ehrsql2024_sqlite)
    try:
        patients = con.execute("select count(*) from patients").fetchone()[0]
        current = con.execute("select count(distinct subject_id) from admissions where dischtime is null").fetchone()[0]
    finally:
        con.close()
    # 4 current patients (all there are) + 90 sampled (docs/benchmarks.md#ehrsql-2024-database)
    assert (patients, current) == (94, 4)


def test_gold_sql_reproduces_the_published_answers(ehrsql2024_sqlite):
    labels = json.loads((EHRSQL_2024 / "valid" / "label.json").read_text())
    answers = json.loads((EHRSQL_2024 / "valid" / "answer.json").read_text())
    con = sqlite3.connect(ehrsql2024_sqlite)
    con.text_factory = lambda b: b.decode(errors="ignore")  # as the published scorer
    matched, mismatched = 0, []
    try:
        for key, sql in labels.items():
            if sql == "null":
                continue
            try:
                got = format_answer(con.execute(prepare_gold_sql(sql)).fetchall())
            except sqlite3.Error as exc:
                got = f"error: {exc}"
            if got == answers[key]:
                matched += 1
            else:
                mismatched.append((key, got, answers[key]))
    finally:
        con.close()

    total = matched + len(mismatched)
    rate = matched / total
    print(f"EHRSQL-2024 valid: {matched}/{total} answerable questions match ({rate:.2%})")
    for key, got, expected in mismatched[:10]:
        print(f"  {key}: got {got[:120]} expected {expected[:120]}")
    assert total == 931
    assert rate >= MIN_MATCH_RATE  # achieved 931/931 (100 %) on the MIMIC-IV demo 2.2
