"""The renamed profiles on the demos: `renamed` (EHR-ChatQA names, docs/benchmarks.md#ehr-chatqa-renamed-schemas)
answers the EHRSQL-2024
questions once their SQL is renamed, `renamed_random` draws a schema per seed, and the hidden lineage leads
every benchmark row back to its raw row."""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import duckdb
import pytest

from ehrbench.ehrsql import format_answer, prepare_gold_sql
from ehrbench.export import export_parquet, export_schema
from ehrbench.profiles import BenchmarkDatabase, profile_vars, schema_renames
from ehrbench.renaming import published_rename, rename_sql, table_name_value_columns
from ehrbench.transform import run_dbt
from ehrbench.warehouse import connect, drop_schemas
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.integration

EHRSQL_2024 = SHARED_DATA / "ehrsql-2024" / "mimic_iv"


@pytest.fixture(scope="module")
def built(demo_build, tmp_path_factory) -> dict:
    """The session's demo build's warehouse, copied (the seed test rebuilds renamed_random in it), and the four
    databases exported from it as the tests' own files. The build's profiles are those of profile_vars(seed=0): its
    manifest says so, or the tests' expectations would not apply."""
    manifest = json.loads((demo_build["folder"] / "manifest.json").read_text())
    built_vars = {group: values for group, values in manifest["profile_vars"].items() if group != "dq"}
    assert built_vars == {group: values for group, values in profile_vars(seed=0).items() if group != "dq"}
    root = tmp_path_factory.mktemp("renamed")
    warehouse = root / "warehouse.duckdb"
    shutil.copyfile(demo_build["snapshot"] / "warehouse.duckdb", warehouse)
    files = {}
    for db in (BenchmarkDatabase("ehrsql2024", "mimic_iv"), BenchmarkDatabase("renamed", "mimic_iv"),
               BenchmarkDatabase("renamed_random", "mimic_iv"), BenchmarkDatabase("renamed_random", "eicu")):
        files[db.key] = db.files(root / "build")
        export_schema(warehouse, db.schema, *files[db.key], sqlite_numeric=db.sqlite_numeric)
    return {"root": root, "warehouse": warehouse, "files": files}


def _rows(sqlite_path: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(sqlite_path)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_renamed_mimic_iv_keeps_what_ehrsql2024_filters_and_splits_icd_codes(built):
    renamed = built["files"]["renamed/mimic_iv"][1]
    # EHR-ChatQA keeps the potassium lab and magnesium sulfate orders that EHRSQL-2024's label-owner filter drops
    assert _rows(renamed, "select count(*) from labtesttypes where itemname = 'potassium'")[0][0] > 0
    ehrsql2024 = built["files"]["ehrsql2024/mimic_iv"][1]
    assert _rows(ehrsql2024, "select count(*) from d_labitems where label = 'potassium'") == [(0,)]
    versions = dict(_rows(renamed, "select codeversion, count(*) from admissiondiagnoses group by 1"))
    assert set(versions) == {9, 10}
    assert _rows(renamed, "select count(*) from admissiondiagnoses where icdcode like 'icd%' or icdcode like '%|%'") \
        == [(0,)]
    # every diagnosis joins its dictionary on code + version
    orphans = _rows(renamed, "select count(*) from admissiondiagnoses d left join diagnosiscodes c "
                             "on c.icdcode = d.icdcode and c.codeversion = d.codeversion where c.recordid is null")
    assert orphans == [(0,)]
    event_types = {t for (t,) in _rows(renamed, "select distinct eventtype from costrecords")}
    assert event_types == {"admissiondiagnoses", "labresults", "admissionprocedures", "medicationorders"}


def _without_label_owner_drops(renamed_sqlite: Path, owners: list[tuple[str, str]], target: Path) -> Path:
    """A copy of the renamed database with EHRSQL-2024's label-owner filter applied
    (docs/benchmarks.md#ehrsql-2024-build-algorithm (step 5)): the
    one designed difference between the two databases besides the costs."""
    target.write_bytes(renamed_sqlite.read_bytes())
    con = sqlite3.connect(target)
    try:
        con.execute("create temp table owner (label text, owner_table text)")
        con.executemany("insert into owner values (?, ?)", owners)
        for dictionary, name_column, owner in (("labtesttypes", "itemname", "labevents"),
                                                ("clinicalitemtypes", "itemname", "inputevents"),
                                                ("medicationorders", "medicationname", "prescriptions")):
            con.execute(f"delete from {dictionary} where {name_column} in "
                        f"(select label from owner where owner_table <> '{owner}')")
        con.execute("delete from labresults where itemcode not in (select itemcode from labtesttypes)")
        for events in ("intakerecords", "outputrecords"):
            con.execute(f"delete from {events} where itemcode not in (select itemcode from clinicalitemtypes)")
        con.commit()
    finally:
        con.close()
    return target


def _adds_rows_only(got: str, expected: str) -> bool:
    """The answer has every expected row (and more); a full first-100-rows answer cannot be told apart."""
    got_rows, expected_rows = ast.literal_eval(got), ast.literal_eval(expected)
    if len(expected_rows) >= 100:
        return True
    return {tuple(row) for row in expected_rows} < {tuple(row) for row in got_rows}


def test_ehrsql2024_questions_renamed_reproduce_the_published_answers(built):
    """The published EHRSQL-2024 gold SQL, renamed to EHR-ChatQA names (sqlglot), on the renamed database with
    the label-owner filter applied reproduces the published answers: the renamed pipeline is the EHRSQL-2024
    one. Cost questions are left out (the renamed profile draws its own costs); ICD joins may differ where a
    code exists in both ICD-9 and ICD-10, as renamed SQL joins on the code alone."""
    if not EHRSQL_2024.is_dir():
        pytest.skip(f"EHRSQL-2024 data not found at {EHRSQL_2024}")
    labels = json.loads((EHRSQL_2024 / "valid" / "label.json").read_text())
    answers = json.loads((EHRSQL_2024 / "valid" / "answer.json").read_text())
    rename = published_rename("mimic_iv")
    value_columns = table_name_value_columns(rename)
    with connect(built["warehouse"], read_only=True) as warehouse:
        owners = warehouse.execute(
            "select label, owner_table from int_ehrsql2024__mimic_iv.int_ehrsql2024__mimic_iv__label_owner").fetchall()
    filtered = _without_label_owner_drops(built["files"]["renamed/mimic_iv"][1], owners,
                                          built["root"] / "filtered.sqlite")
    con = sqlite3.connect(filtered)
    con.text_factory = lambda b: b.decode(errors="ignore")  # as the published scorer
    matched, icd_ambiguous, unexplained = 0, 0, []
    try:
        for qid, sql in labels.items():
            if sql == "null" or "cost" in sql:
                continue
            renamed_sql = rename_sql(sql, rename, value_columns=value_columns)
            try:
                got = format_answer(con.execute(prepare_gold_sql(renamed_sql)).fetchall())
            except sqlite3.Error as exc:
                got = f"error: {exc}"
            if got == answers[qid]:
                matched += 1
            elif "icd_code" in sql and _adds_rows_only(got, answers[qid]):
                icd_ambiguous += 1
            else:
                unexplained.append((qid, renamed_sql, got[:200], answers[qid][:200]))
    finally:
        con.close()
    total = matched + icd_ambiguous + len(unexplained)
    print(f"\nEHRSQL-2024 valid (no cost questions) renamed, on renamed/mimic_iv with the label-owner filter: "
          f"{matched}/{total} match ({matched / total:.2%}), {icd_ambiguous} ICD questions differ, "
          f"{len(unexplained)} unexplained")
    assert not unexplained, unexplained[:3]
    assert matched / total >= 0.95


def _schema_and_counts(sqlite_path: Path) -> tuple[list[tuple], dict[str, int]]:
    ddl = _rows(sqlite_path, "select name, sql from sqlite_master where type = 'table' order by name")
    return ddl, {name: _rows(sqlite_path, f'select count(*) from "{name}"')[0][0] for name, _ in ddl}


def test_renamed_random_schema_is_drawn_per_seed(built):
    """Seed 0 (the fixture's build), then seed 1, then seed 0 again on the same warehouse."""
    warehouse, root = built["warehouse"], built["root"]
    exported = {(0, database): built["files"][f"renamed_random/{database}"][1] for database in ("mimic_iv", "eicu")}
    for run_index, seed in ((1, 1), (2, 0)):
        drop_schemas(warehouse, ("renamed_random__mimic_iv", "renamed_random__eicu"))
        run = run_dbt(["run", "--select", "renamed_random"], warehouse=warehouse, work_dir=root / "dbt",
                      vars=profile_vars(seed=seed))
        assert run.count("error") == 0, run.summary
        for database in ("mimic_iv", "eicu"):
            db = BenchmarkDatabase("renamed_random", database)
            paths = db.files(root / f"random_{run_index}")
            export_schema(warehouse, db.schema, *paths, sqlite_numeric=db.sqlite_numeric)
            exported[run_index, database] = paths[1]

    renamed_counts = _schema_and_counts(built["files"]["renamed/mimic_iv"][1])[1]
    for database in ("mimic_iv", "eicu"):
        ddl_0, counts_0 = _schema_and_counts(exported[0, database])
        ddl_1, counts_1 = _schema_and_counts(exported[1, database])
        ddl_0_again, _ = _schema_and_counts(exported[2, database])
        assert ddl_0 == ddl_0_again  # same seed, same schema ...
        digests = {hashlib.sha256(exported[i, database].read_bytes()).hexdigest() for i in (0, 2)}
        assert len(digests) == 1  # ... byte for byte
        assert {name for name, _ in ddl_0} != {name for name, _ in ddl_1}
        # the same rows under both names: map each drawn table back to its renamed table
        for seed, counts in ((0, counts_0), (1, counts_1)):
            drawn = schema_renames(seed)[f"renamed_random/{database}"]
            published = published_rename(database)
            by_drawn_name = {t.target: published.table(t.source).target for t in drawn.tables}
            assert set(counts) == set(by_drawn_name)
            if database == "mimic_iv":
                assert {by_drawn_name[name]: n for name, n in counts.items()} == renamed_counts


def test_lineage_leads_renamed_rows_to_their_raw_rows(built):
    path = built["root"] / "hidden" / "renamed_mimic_iv.parquet"
    export_parquet(built["warehouse"], "lineage.renamed__mimic_iv", path)
    con = duckdb.connect(str(built["warehouse"]), read_only=True)
    try:
        con.execute(f"create temp view lineage as select * from read_parquet('{path}')")
        tables = {t for (t,) in con.execute("select distinct table_name from lineage").fetchall()}
        assert tables == {t.target for t in published_rename("mimic_iv").tables} - {"costrecords"}
        # each lab result has the item and value of the raw labevents row its key names
        mismatched = con.execute("""
            select count(*) filter (where raw.labevent_id is null or raw.itemid <> r.itemcode
                                    or raw.valuenum is distinct from r.resultvalue),
                   count(*)
            from renamed__mimic_iv.labresults as r
            join lineage as l on l.table_name = 'labresults' and l.row_id = r.recordid
            left join raw_mimic_iv.labevents as raw
                on raw.labevent_id = cast(json_extract(l.source_key, '$.labevent_id') as bigint)
        """).fetchone()
        assert mismatched[1] == con.execute("select count(*) from renamed__mimic_iv.labresults").fetchone()[0]
        assert mismatched[0] == 0
        # source_row is the raw file row: patients rows point at the raw row of the same subject
        wrong_rows = con.execute("""
            with raw as (select subject_id, row_number() over () as file_row from raw_mimic_iv.patients)
            select count(*) from renamed__mimic_iv.demographics as d
            join lineage as l on l.table_name = 'demographics' and l.row_id = d.recordid
            join raw on raw.file_row = l.source_row
            where raw.subject_id <> d.patientid
        """).fetchone()[0]
        assert wrong_rows == 0
    finally:
        con.close()


def test_eicu_lineage_leads_renumbered_ids_to_their_source_rows(built):
    path = built["root"] / "hidden" / "renamed_eicu.parquet"
    export_parquet(built["warehouse"], "lineage.renamed__eicu", path)
    con = duckdb.connect(str(built["warehouse"]), read_only=True)
    try:
        con.execute(f"create temp view lineage as select * from read_parquet('{path}')")
        tables = {t for (t,) in con.execute("select distinct table_name from lineage").fetchall()}
        non_empty = {t.target for t in published_rename("eicu").tables
                     if con.execute(f"select count(*) from renamed__eicu.{t.target}").fetchone()[0] > 0}
        assert tables == non_empty - {"cost"}  # (the demo has no vitalPeriodic rows)
        checked, wrong = con.execute("""
            select count(*), count(*) filter (where raw.diagnosisid is null or raw.patientunitstayid <> c.unit_id
                                              or lower(trim(raw.icd9code)) is distinct from c.icd9_code)
            from renamed__eicu.condition as c
            join lineage as l on l.table_name = 'condition' and l.row_id = c.condition_id
            left join raw_eicu.diagnosis as raw
                on raw.diagnosisid = cast(json_extract(l.source_key, '$.diagnosisid') as bigint)
        """).fetchone()
        assert checked == con.execute("select count(*) from renamed__eicu.condition").fetchone()[0] > 0
        assert wrong == 0
    finally:
        con.close()
