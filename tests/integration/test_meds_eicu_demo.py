"""The demo build's eICU MEDS dataset (meds/eicu/, docs/benchmarks.md#meds-export), as the eICU-MEDS ETL 0.1.0 writes it
(Medical-Event-Data-Standard/eICU_MEDS configs/event_configs.yaml on MEDS-Extract 0.7).

Expected values come from the published rules and the published code, not from our output: the times and births
are worked out here from the demo's raw CSV by the configuration's formulas; the event counts per kind are those of
the published ETL itself (eicu-meds 0.1.0 from PyPI) run on this demo copy, its vitalPeriodic block removed because the
copy lacks that file (the ETL fails on a missing table)."""

from __future__ import annotations

import csv
import gzip
from datetime import datetime, timedelta

import duckdb
import meds
import pyarrow.parquet as pq
import pytest

from ehrbench.layout import BuildLayout

pytestmark = pytest.mark.integration

# eicu-meds 0.1.0 on the demo (without vitalPeriodic): events per kind, 1,157,876 in all over 2,174 subjects
PUBLISHED_COUNTS = {
    "ADMISSION_DIAGNOSIS": 7578, "ALLERGY": 2475, "CAREPLAN_EOL": 13, "CAREPLAN_GENERAL": 33023, "CAREPLAN_GOAL": 2842,
    "CAREPLAN_INFECTIOUS_DISEASE": 111, "DIAGNOSIS": 24681, "GENDER": 2174, "HOSPITAL_ADMISSION": 2174,
    "HOSPITAL_DISCHARGE": 2174, "ICU_ADMISSION": 2520, "ICU_ADMISSION_HEIGHT": 2451, "ICU_ADMISSION_WEIGHT": 2322,
    "ICU_DISCHARGE": 2520, "ICU_DISCHARGE_WEIGHT": 1236, "INFUSION_DRUG": 38256, "LAB//RESULT": 29871,
    "LAB//SPECIMEN_DRAWN": 29877, "MEDICATION//STARTED": 75604, "MEDICATION//STOPPED": 75604, "MEDS_BIRTH": 2170,
    "MEDS_DEATH": 182, "RACE": 2174, "SUBJECT_WEIGHT_AT_INFUSION": 3508, "TREATMENT": 37692,
    "VITALS//APERIODIC//BP//NONINVASIVE_SYSTOLIC": 241808, "VITALS//APERIODIC//BP//NONINVASIVE_DIASTOLIC": 241823,
    "VITALS//APERIODIC//BP//NONINVASIVE_MEAN": 243178, "VITALS//APERIODIC//CARDIAC_OUTPUT": 14235,
    "VITALS//APERIODIC//CARDIAC_INPUT": 11865, "VITALS//APERIODIC//SVR": 17789, "VITALS//APERIODIC//SVRI": 3440,
    "VITALS//APERIODIC//PAOP": 169, "VITALS//APERIODIC//PVR": 169, "VITALS//APERIODIC//PVRI": 168}
KIND = ("case when code like 'VITALS//%' then code when code like 'LAB//%' or code like 'MEDICATION//%' "
        "then array_to_string(string_split(code, '//')[1:2], '//') else split_part(code, '//', 1) end")


@pytest.fixture(scope="module")
def events(demo):
    con = duckdb.connect()
    con.execute(f"create view events as select * from read_parquet('{BuildLayout(demo).meds('eicu')}/data/*.parquet')")
    yield con
    con.close()


@pytest.fixture(scope="module")
def stays(eicu_demo_dir) -> list[dict]:
    with gzip.open(eicu_demo_dir / "patient.csv.gz", "rt", newline="") as handle:
        return list(csv.DictReader(handle))


def test_every_file_is_valid_meds(demo):
    root = BuildLayout(demo).meds("eicu")
    for shard in sorted((root / "data").glob("*.parquet")):
        meds.DataSchema.validate(pq.read_table(shard))
    meds.CodeMetadataSchema.validate(pq.read_table(root / meds.code_metadata_filepath))
    meds.SubjectSplitSchema.validate(pq.read_table(root / meds.subject_splits_filepath))


def test_the_event_counts_are_the_published_etls(events):
    counts = dict(events.execute(f"select {KIND}, count(*) from events group by 1").fetchall())
    assert counts == PUBLISHED_COUNTS
    assert events.execute("select count(*), count(distinct subject_id) from events").fetchone() == (1_157_876, 2174)
    # the ETL's quoted-empty strings stay empty components; null ones are UNK (its demo run: 4 and 34, and 398
    # hospital admissions with an UNK component, from the hospitals' null regions and bed categories)
    codes = dict(events.execute("select code, count(*) from events group by 1").fetchall())
    assert (codes["GENDER//"], codes["RACE//"], codes.get("GENDER//UNK")) == (4, 34, None)
    assert sum(n for c, n in codes.items() if c.startswith("HOSPITAL_ADMISSION//") and "UNK" in c.split("//")) == 398


def test_unit_stays_are_anchored_at_the_end_of_their_discharge_year(events, stays):
    """ICU admission = 31 December of hospitaldischargeyear at hospitaldischargetime24, minus hospitaldischargeoffset
    minutes; hospital admission and ICU discharge count their offsets from it; the subject is the health-system
    stay; births are the hospital admission minus (age * 365.25 + 182.625) days, "> 89" being 90."""
    admissions, births = set(), set()
    for stay in stays:
        discharge = datetime.strptime(f"{stay['hospitaldischargeyear']}-12-31 {stay['hospitaldischargetime24']}",
                                      "%Y-%m-%d %H:%M:%S")
        unit_admit = discharge - timedelta(minutes=int(stay["hospitaldischargeoffset"]))
        subject = int(stay["patienthealthsystemstayid"])
        admissions.add((subject, int(stay["patientunitstayid"]), unit_admit))
        age = 90 if stay["age"] == "> 89" else int(stay["age"]) if stay["age"].isdigit() else None
        if age is not None:
            hospital_admit = unit_admit + timedelta(minutes=int(stay["hospitaladmitoffset"]))
            births.add((subject, hospital_admit - timedelta(days=age * 365.25 + 182.625)))
    found = set(events.execute("select subject_id, icustay_id, time from events where code like 'ICU_ADMISSION//%'"
                               ).fetchall())
    assert found == admissions
    assert set(events.execute("select subject_id, time from events where code = 'MEDS_BIRTH'").fetchall()) == births
    # the configuration's README example: health-system stay 129391, 87 years old
    assert (129391, datetime(1928, 6, 29, 14, 36)) in births


def test_diagnoses_have_the_icd_codes_eicu_lists_as_parents(demo):
    codes = pq.read_table(BuildLayout(demo).meds("eicu") / meds.code_metadata_filepath).to_pylist()
    parents = {c["code"]: c["parent_codes"] for c in codes}
    assert sorted(parents["DIAGNOSIS//burns/trauma|dermatology|cellulitis"]) == ["ICD10CM/L03.90", "ICD9CM/682.9"]
    assert sum(1 for c, p in parents.items() if p) == 860  # the published run's codes with parents
