"""The demo build's MEDS datasets (stage meds): valid under the `meds` package's schemas, coded as the MEDS-for-MIMIC-IV
ETL codes them (expected events derived here from the raw demo CSVs by the ETL's published rules, not from our
output), and the shifted timeline on the ehrsql2024 database's patients and times."""

from __future__ import annotations

import json
from datetime import datetime

import duckdb
import meds
import pyarrow.parquet as pq
import pytest

from ehrbench.layout import BuildLayout

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def raw(demo, mimic_demo_dir):
    """A connection with the raw timeline's events and the demo's raw CSVs as views."""
    con = duckdb.connect()
    con.execute(f"create view events as select * from read_parquet('{BuildLayout(demo).meds('raw')}/data/*.parquet')")
    for table in ("patients", "admissions", "diagnoses_icd", "procedures_icd", "labevents"):
        con.execute(f"create view {table} as select * from read_csv('{mimic_demo_dir}/hosp/{table}.csv.gz')")
    yield con
    con.close()


@pytest.mark.parametrize("timeline", ["raw", "shifted"])
def test_every_file_is_valid_meds_and_every_code_is_described(demo, timeline):
    root = BuildLayout(demo).meds(timeline)
    shards = sorted((root / "data").glob("*.parquet"))
    assert shards
    seen: set[int] = set()
    for shard in shards:
        shard_table = pq.read_table(shard)
        meds.DataSchema.validate(shard_table)
        rows = duckdb.sql("select subject_id, time from shard_table").fetchall()
        # a subject's events are contiguous and in time order, its static (null-time) events first
        key = [(s, t is not None, t or 0) for s, t in rows]
        assert key == sorted(key, key=lambda k: (k[0], k[1], k[2] if k[1] else 0))
        subjects = {s for s, _ in rows}
        assert not subjects & seen  # never split over shards
        seen |= subjects
    codes = pq.read_table(root / "metadata" / "codes.parquet")
    meds.CodeMetadataSchema.validate(codes)
    data_codes = {c for (c,) in duckdb.sql(f"select distinct code from read_parquet('{root}/data/*.parquet')")
                  .fetchall()}
    assert data_codes == set(codes.column("code").to_pylist())
    splits = pq.read_table(root / "metadata" / "subject_splits.parquet")
    meds.SubjectSplitSchema.validate(splits)
    assert set(splits.column("subject_id").to_pylist()) == seen
    meds.DatasetMetadataSchema.validate(json.loads((root / "metadata" / "dataset.json").read_text()))
    entry = json.loads((demo / "manifest.json").read_text())["meds"]["timelines"][timeline]
    assert entry["subjects"] == len(seen) and entry["codes"] == codes.num_rows


def _missing(con, expected_sql: str, code_like: str) -> tuple[int, int]:
    """(expected events the data lacks, events of the kind the data has): ETL rule vs export."""
    missing = con.execute(f"select count(*) from ({expected_sql} except all "
                          f"select subject_id, time, code from events where code like '{code_like}')").fetchone()[0]
    found = con.execute(f"select count(*) from events where code like '{code_like}'").fetchone()[0]
    return missing, found


def test_raw_events_are_coded_as_the_mimic_iv_meds_etl_codes_them(raw):
    # HOSPITAL_ADMISSION//{admission_type}//{admission_location ?? 'UNK'} at admittime
    missing, found = _missing(raw, """select subject_id, admittime, 'HOSPITAL_ADMISSION//' || admission_type || '//'
                                      || coalesce(admission_location, 'UNK') from admissions""",
                              "HOSPITAL_ADMISSION//%")
    admissions = raw.execute("select count(*) from admissions").fetchone()[0]
    assert missing == 0 and found == admissions
    # DIAGNOSIS//ICD//{icd_version}//{icd_code} at the admission's dischtime
    missing, found = _missing(raw, """select d.subject_id, a.dischtime, 'DIAGNOSIS//ICD//' || d.icd_version || '//'
                                      || d.icd_code from diagnoses_icd d join admissions a using (hadm_id)""",
                              "DIAGNOSIS//ICD//%")
    assert missing == 0 and found == raw.execute("select count(*) from diagnoses_icd").fetchone()[0]
    # LAB//RESULT//{itemid}//{valueuom ?? 'UNK'} at storetime, with valuenum as the numeric value
    missing, found = _missing(raw, """select subject_id, storetime, 'LAB//RESULT//' || itemid || '//'
                                      || coalesce(valueuom, 'UNK') from labevents where storetime is not null""",
                              "LAB//RESULT//%")
    assert missing == 0 and found == raw.execute(
        "select count(*) from labevents where storetime is not null").fetchone()[0]
    wrong_values = raw.execute("""
        select count(*) from (select subject_id, storetime as time, 'LAB//RESULT//' || itemid || '//'
                                     || coalesce(valueuom, 'UNK') as code, cast(valuenum as float) as v
                              from labevents where storetime is not null and valuenum is not null
                              except all
                              select subject_id, time, code, numeric_value from events
                              where code like 'LAB//RESULT//%')""").fetchone()[0]
    assert wrong_values == 0
    # GENDER//{gender} static; MEDS_BIRTH at the start of anchor_year - anchor_age
    missing, found = _missing(raw, "select subject_id, null::timestamp, 'GENDER//' || gender from patients",
                              "GENDER//%")
    assert missing == 0 and found == 100
    missing, found = _missing(raw, """select subject_id, make_timestamp(anchor_year - anchor_age, 1, 1, 0, 0, 0),
                                      'MEDS_BIRTH' from patients""", "MEDS_BIRTH")
    assert missing == 0 and found == 100


def _dotted(code: str, position: int) -> str:
    """MIMIC_IV_MEDS pre_MEDS.py add_dot: a dot after `position` characters of a longer code."""
    return code[:position] + "." + code[position:] if len(code) > position else code


def test_icd_codes_get_the_etls_dotted_parent_codes(demo, raw):
    codes = {row["code"]: row for row in pq.read_table(BuildLayout(demo).meds("raw") / "metadata" / "codes.parquet")
             .to_pylist()}
    checked = 0
    for version, code in raw.execute("select distinct icd_version, icd_code from diagnoses_icd").fetchall():
        position = 4 if version == 9 and code.startswith("E") else 3
        parent = f"ICD{version}CM/{_dotted(code, position)}"
        assert codes[f"DIAGNOSIS//ICD//{version}//{code}"]["parent_codes"] == [parent]
        checked += 1
    for version, code in raw.execute("select distinct icd_version, icd_code from procedures_icd").fetchall():
        parent = f"ICD9Proc/{_dotted(code, 2)}" if version == 9 else f"ICD10PCS/{code}"
        assert codes[f"PROCEDURE//ICD//{version}//{code}"]["parent_codes"] == [parent]
        checked += 1
    assert checked > 1000
    assert any(code.startswith("DIAGNOSIS//ICD//9//E") for code in codes)  # the E-code rule was exercised
    assert codes["MEDS_BIRTH"]["description"] == "Birth"


def test_the_shifted_timeline_is_the_ehrsql2024_databases_patients_and_times(demo):
    build = BuildLayout(demo)
    con = duckdb.connect()
    con.execute(f"create view events as select * from read_parquet('{build.meds('shifted')}/data/*.parquet')")
    con.execute(f"attach '{build.root / 'db' / 'ehrsql2024' / 'mimic_iv.duckdb'}' as db (read_only)")
    admissions = con.execute("select subject_id, hadm_id, admittime from db.admissions").fetchall()
    shifted = dict(((s, h), t) for s, h, t in con.execute(
        "select subject_id, hadm_id, time from events where code like 'HOSPITAL_ADMISSION//%'").fetchall())
    assert len(admissions) == len(shifted) and all(shifted[(s, h)] == t for s, h, t in admissions)
    assert {s for (s,) in con.execute("select distinct subject_id from events").fetchall()} == {
        s for (s,) in con.execute("select subject_id from db.patients").fetchall()}
    assert con.execute("select max(time) from events").fetchone()[0] <= datetime(2100, 12, 31, 23, 59)
    con.close()
