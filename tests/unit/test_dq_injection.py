"""The data-quality error injector (docs/benchmarks.md#data-quality-error-injection) on a small hand-made extract:
every sub-type makes an error whose
labels say what happened, a row is never part of two errors, tasks are seeded and byte-reproducible, recipes are
checked on load, and a written task's oracle scores 1.0."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import re
import signal
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from ehrbench.dq.corruption import Change, Corruption, merge_in_order
from ehrbench.dq.csv_files import ExtractFiles
from ehrbench.dq.extract import (
    CODE_COLUMN,
    DATE_FORMAT,
    EXTRACT_SCHEMA,
    ROW_ID,
    TABLE_ORDER,
    TIME_FORMAT,
    read_extract,
    shared_strings,
    sort_rows,
    with_row_ids,
)
from ehrbench.dq.facts import load_facts
from ehrbench.dq.inject import inject_task
from ehrbench.dq.injectors import INJECTORS, Scope
from ehrbench.dq.instructions import SUBTYPES
from ehrbench.dq.recipes import DEFAULT_RECIPES, Recipe, TaskRecipe, load_recipes
from ehrbench.dq.row_ids import row_id
from ehrbench.dq.score import score_task
from ehrbench.dq.tasks import forbidden_names, verify_task, write_oracle, write_task
from ehrbench.errors import ValidationError
from tests.unit.dq_columns import COLUMNS

FACTS = load_facts()


def decimals(text: str) -> int:
    """Decimals that carry information: '67.0' has none."""
    fraction = text.partition(".")[2]
    return len(fraction) if fraction.strip("0") else 0
P1, P2, P3 = "10000032", "10000084", "10000117"  # P1 male (prostate diagnosis, finasteride), P3 female
ADMISSIONS = {  # id: patient, admit, discharge, age (ids sparse, as in the source)
    "21000012": (P1, "2150-01-02 08:00:00", "2150-01-09 12:00:00", "71"),
    "23500007": (P1, "2151-03-10 10:30:00", "2151-03-15 14:00:00", "72"),
    "25123456": (P2, "2160-06-01 09:15:00", "2160-06-05 11:00:00", "80"),
    "27654321": (P2, "2161-02-11 22:40:00", "2161-02-14 10:00:00", "81"),
    "28111111": (P3, "2170-09-20 13:00:00", "2170-09-24 16:30:00", "45"),
    "29000001": (P3, "2171-01-05 07:45:00", "2171-01-08 12:00:00", "46"),
}
STAY = "30000001"  # P1's ICU stay during the first admission
LAB_UNITS = {"50983": ("mEq/L", "133.0", "145.0"), "50912": ("mg/dL", "0.5", "1.2"),
             "50931": ("mg/dL", "70.0", "100.0"), "51222": ("g/dL", "13.7", "17.5")}
LAB_VALUES = {  # per admission: the value of each code on its first and second morning (glucose below 171)
    "50983": ("138.0", "141.0"), "50912": ("1.2", "0.9"), "50931": ("100.0", "145.0"), "51222": ("12.3", "10.8")}


def rows_of_extract() -> dict[str, list[dict]]:
    """The tiny extract as rows of text cells (missing columns are null)."""
    rows: dict[str, list[dict]] = {table: [] for table in TABLE_ORDER}
    rows["patients"] = [
        dict(patient_id=P1, sex="M", birth_date="2079-02-11"),
        dict(patient_id=P2, sex="F", birth_date="2080-01-20"),
        dict(patient_id=P3, sex="F", birth_date="2125-04-03", death_date="2172-05-01"),
    ]
    for admission, (patient, admit, discharge, age) in ADMISSIONS.items():
        rows["admissions"].append(dict(
            admission_id=admission, patient_id=patient, admit_time=admit, discharge_time=discharge,
            admission_type="EW EMER.", admission_location="EMERGENCY ROOM", discharge_location="HOME",
            insurance="Medicare", marital_status="MARRIED", age_at_admission=age))
        day = datetime.strptime(admit, TIME_FORMAT).replace(hour=6, minute=0) + timedelta(days=1)
        for code, values in LAB_VALUES.items():
            unit, low, high = LAB_UNITS[code]
            for n, value in enumerate(values):
                rows["lab_results"].append(dict(
                    patient_id=patient, admission_id=admission, test_code=code,
                    charted_at=(day + timedelta(days=n, minutes=int(code) % 7)).strftime(TIME_FORMAT), value=value,
                    unit=unit, ref_low=low, ref_high=high, priority="ROUTINE"))
    rows["icu_stays"] = [dict(stay_id=STAY, patient_id=P1, admission_id="21000012", first_care_unit="MICU",
                              last_care_unit="MICU", in_time="2150-01-02 20:00:00", out_time="2150-01-05 09:00:00")]
    for hour, heart_rate in enumerate(("80.0", "92.0", "104.0", "88.0")):
        at = f"2150-01-03 {10 + hour:02d}:00:00"
        rows["chart_observations"] += [
            dict(patient_id=P1, admission_id="21000012", stay_id=STAY, item_code="220045", charted_at=at,
                 value=heart_rate, unit="bpm")]
    rows["chart_observations"] += [
        dict(patient_id=P1, admission_id="21000012", stay_id=STAY, item_code="220615",
             charted_at="2150-01-03 05:00:00", value="1.1", unit="mg/dL"),
        dict(patient_id=P1, admission_id="21000012", stay_id=STAY, item_code="225664",
             charted_at="2150-01-03 12:00:00", value="130.0", unit="mg/dL"),
        dict(patient_id=P1, admission_id="21000012", stay_id=STAY, item_code="225664",
             charted_at="2150-01-04 12:00:00", value="118.0", unit="mg/dL"),
    ]
    rows["lab_tests"] = [dict(test_code=code, name=name, fluid="Blood", category=category) for code, name, category in
                         [("50912", "Creatinine", "Chemistry"), ("50931", "Glucose", "Chemistry"),
                          ("50983", "Sodium", "Chemistry"), ("51222", "Hemoglobin", "Hematology")]]
    rows["chart_items"] = [dict(item_code=code, name=name, category="Routine Vital Signs", unit=unit)
                           for code, name, unit in
                           [("220045", "Heart Rate", "bpm"), ("220228", "Hemoglobin", "g/dl"),
                            ("220615", "Creatinine (serum)", "mg/dL"), ("220645", "Sodium (serum)", "mEq/L"),
                            ("225664", "Glucose finger stick (range 70-100)", "mg/dL")]]
    rows["diagnoses"] = [
        dict(patient_id=P1, admission_id="21000012", sequence="1", icd_code="N400", icd_version="10",
             description="Benign prostatic hyperplasia without lower urinary tract symptoms"),
        dict(patient_id=P1, admission_id="21000012", sequence="2", icd_code="I10", icd_version="10",
             description="Essential (primary) hypertension"),
        dict(patient_id=P2, admission_id="25123456", sequence="1", icd_code="4019", icd_version="9",
             description="Unspecified essential hypertension"),
        dict(patient_id=P3, admission_id="28111111", sequence="1", icd_code="N800", icd_version="10",
             description="Endometriosis of uterus"),
    ]

    def order(patient, admission, start, stop, drug, strength, dose, unit, route):
        return dict(patient_id=patient, admission_id=admission, start_time=start, stop_time=stop, drug_type="MAIN",
                    drug=drug, product_strength=strength, dose=dose, dose_unit=unit, route=route)

    rows["medication_orders"] = [
        order(P1, "21000012", "2150-01-03 09:00:00", "2150-01-08 09:00:00", "Finasteride", "5mg Tablet", "5", "mg",
              "PO/NG"),
        order(P1, "21000012", "2150-01-02 10:00:00", "2150-01-04 10:00:00", "Heparin", "5000 Unit / mL- 1mL Vial",
              "5000", "UNIT", "SC"),
        order(P2, "25123456", "2160-06-01 12:00:00", "2160-06-05 10:00:00", "Tamsulosin", "0.4 mg Cap", "0.4", "mg",
              "PO"),
        order(P2, "27654321", "2161-02-12 08:00:00", "2161-02-13 08:00:00", "Acetaminophen", "500mg Tablet", "1000",
              "mg", "PO/NG"),
        order(P3, "28111111", "2170-09-20 15:00:00", "2170-09-22 15:00:00", "Ondansetron", "4mg/2mL Vial", "4", "mg",
              "IV"),
    ]
    return rows


def tables_of(rows: dict[str, list[dict]]) -> dict[str, pd.DataFrame]:
    """Text frames with exactly the table's columns, row ids and the table's row order."""
    tables = {}
    for table in TABLE_ORDER:
        frame = pd.DataFrame([[row.get(c) for c in COLUMNS[table]] for row in rows.get(table, [])],
                             columns=COLUMNS[table], dtype=object)
        tables[table] = sort_rows(table, with_row_ids(table, frame))
    return tables


@pytest.fixture(scope="module")
def pristine() -> dict[str, pd.DataFrame]:
    return tables_of(rows_of_extract())


@pytest.fixture
def extract(pristine) -> dict[str, pd.DataFrame]:
    return {table: frame.copy() for table, frame in pristine.items()}


def all_subtypes() -> list[tuple[str, str]]:
    return [(family, subtype) for family, injectors in INJECTORS.items() for subtype in injectors]


def scope_of(corruption: Corruption, family: str, subtype: str, patients=None) -> Scope:
    return Scope(corruption, FACTS, INJECTORS[family][subtype].tables, patients)


def row_values(frame: pd.DataFrame, rid: str) -> dict:
    return {column: frame.at[rid, column] for column in frame.columns}


def num(text: str) -> float:
    return float(text)


def half_unit(text: str) -> float:
    """Half of the last written decimal place: the rounding error of a written number."""
    return 0.5 * 10 ** -decimals(text)


def minutes_between(a: str, b: str) -> float:
    return (datetime.strptime(b, TIME_FORMAT) - datetime.strptime(a, TIME_FORMAT)).total_seconds() / 60


def band_high(table: str, code: str) -> float:
    return FACTS.band(table, code).high


def is_outside(table: str, code: str, value: float) -> bool:
    band = FACTS.band(table, code)
    return value < band.low or value > band.high


def conversion(table: str, code: str):
    return next(c for c in FACTS.unit_conversions if c.table == table and str(c.code) == code)


def sex_specific_rows(tables, patient: str, sex: str) -> set[tuple[str, str]]:
    """(table, row id) of the rows of `patient` only a patient of `sex` can have, computed here from the facts."""
    evidence = FACTS.sex_specific[sex]
    found = set()
    for rid, row in tables["diagnoses"].iterrows():
        prefixes = tuple(evidence.icd.get(int(row["icd_version"]), []))
        if row["patient_id"] == patient and prefixes and row["icd_code"].startswith(prefixes):
            found.add(("diagnoses", rid))
    for rid, row in tables["medication_orders"].iterrows():
        if row["patient_id"] == patient and any(d in (row["drug"] or "").lower() for d in evidence.drugs):
            found.add(("medication_orders", rid))
    for rid, row in tables["lab_results"].iterrows():
        if row["patient_id"] == patient and int(row["test_code"]) in evidence.lab_tests:
            found.add(("lab_results", rid))
    return found


# --- what each sub-type's error means, checked on the labels and the corrupted copy ---

def check_range_extreme(pristine, changes):
    (change,) = changes
    code = pristine[change.table].at[change.row_id, CODE_COLUMN[change.table]]
    assert change.field == "value"
    assert num(change.corrupted_value) > band_high(change.table, code)
    assert num(change.corrupted_value) >= 1.5 * band_high(change.table, code) - half_unit(change.corrupted_value)


def check_decimal_shift(pristine, changes):
    (change,) = changes
    code = pristine[change.table].at[change.row_id, CODE_COLUMN[change.table]]
    old, new = num(change.original_value), num(change.corrupted_value)
    assert any(abs(new - old * f) <= half_unit(change.corrupted_value) for f in (10, 100, 1000)), (old, new)
    assert is_outside(change.table, code, new)


def check_unit_confusion(pristine, changes):
    (change,) = changes
    code = pristine[change.table].at[change.row_id, CODE_COLUMN[change.table]]
    factor = conversion(change.table, code).factor
    old, new = num(change.original_value), num(change.corrupted_value)
    assert abs(new - old * factor) <= half_unit(change.corrupted_value) + 1e-9, (old, new, factor)
    assert is_outside(change.table, code, new)


def check_unit_label_mismatch(pristine, changes):
    (change,) = changes
    code = pristine[change.table].at[change.row_id, CODE_COLUMN[change.table]]
    assert change.field == "unit"
    assert change.corrupted_value == conversion(change.table, code).to_unit != change.original_value


def check_in_table_duplicate(pristine, changes):
    evidence, inserted = changes
    assert (evidence.role, inserted.role) == ("evidence", "inserted")
    assert evidence.table == inserted.table
    original = pristine[evidence.table].loc[evidence.row_id]
    copy = inserted.row
    code_column = CODE_COLUMN[evidence.table]
    assert copy["patient_id"] == original["patient_id"] and copy[code_column] == original[code_column]
    apart = abs(minutes_between(original["charted_at"], copy["charted_at"]))
    assert apart in {1, 2, 3, 4, 5}
    old, new = num(original["value"]), num(copy["value"])
    assert old * 1.10 - half_unit(copy["value"]) <= new <= old * 1.50 + half_unit(copy["value"]), (old, new)
    assert new != old
    if original[code_column] == "220045":
        assert copy["value"].endswith(".0")
    assert inserted.original_value == original["value"] and inserted.corrupted_value == copy["value"]


LAB_TO_CHART = {"50931": "225664", "50983": "220645", "50912": "220615", "51222": "220228"}


def check_cross_table_copy(pristine, changes):
    evidence, inserted = changes
    assert (evidence.table, evidence.role) == ("lab_results", "evidence")
    assert (inserted.table, inserted.role) == ("chart_observations", "inserted")
    lab = pristine["lab_results"].loc[evidence.row_id]
    chart = inserted.row
    assert chart["item_code"] == LAB_TO_CHART[lab["test_code"]]
    assert chart["charted_at"] == lab["charted_at"] and chart["patient_id"] == lab["patient_id"]
    stay = pristine["icu_stays"].set_index("stay_id").loc[chart["stay_id"]]
    assert stay["patient_id"] == lab["patient_id"] and stay["admission_id"] == chart["admission_id"]
    assert stay["in_time"] <= lab["charted_at"] <= stay["out_time"]
    old, new = num(lab["value"]), num(chart["value"])
    assert old * 1.30 - half_unit(chart["value"]) <= new <= old * 1.70 + half_unit(chart["value"]), (old, new)


def check_sex_flip(pristine, changes):
    flipped, *evidence = changes
    assert (flipped.table, flipped.field, flipped.role) == ("patients", "sex", "corrupted")
    assert {flipped.original_value, flipped.corrupted_value} == {"M", "F"}
    patient = pristine["patients"].at[flipped.row_id, "patient_id"]
    assert evidence and all(change.role == "evidence" for change in evidence)
    # evidence: sex-specific rows of the patient (all of them, unless an earlier error took some)
    assert {(change.table, change.row_id) for change in evidence} <= sex_specific_rows(
        pristine, patient, flipped.original_value)


def check_opposite_sex_marker_drug(pristine, changes):
    inserted, patient_row = changes
    assert (inserted.role, patient_row.role, patient_row.table) == ("inserted", "evidence", "patients")
    sex = pristine["patients"].at[patient_row.row_id, "sex"]
    order = inserted.row
    other = {"M": "F", "F": "M"}[sex]
    assert order["drug"] in {marker.drug for marker in FACTS.marker_orders[other]}
    assert order["drug"] not in {marker.drug for marker in FACTS.marker_orders[sex]}
    assert order["patient_id"] == pristine["patients"].at[patient_row.row_id, "patient_id"]
    admission = pristine["admissions"].set_index("admission_id").loc[order["admission_id"]]
    assert admission["patient_id"] == order["patient_id"]
    assert admission["admit_time"] <= order["start_time"] <= admission["discharge_time"]


def check_geriatric_drug_age(pristine, changes):
    aged, *evidence = changes
    assert (aged.table, aged.field, aged.corrupted_value) == ("admissions", "age_at_admission", "5")
    admission = pristine["admissions"].at[aged.row_id, "admission_id"]
    assert evidence
    for change in evidence:
        order = pristine["medication_orders"].loc[change.row_id]
        assert (change.table, change.role, order["admission_id"]) == ("medication_orders", "evidence", admission)
        assert any(drug in order["drug"].lower() for drug in FACTS.geriatric_drugs)


def _check_hours_before(table, field, reference):
    def check(pristine, changes):
        (change,) = changes
        assert (change.table, change.field) == (table, field)
        before = minutes_between(change.corrupted_value, pristine[table].at[change.row_id, reference])
        assert 60 <= before <= 72 * 60
    return check


def check_death_before_admission(pristine, changes):
    died, admission_row = changes
    assert (died.table, died.field, admission_row.table, admission_row.role) == (
        "patients", "death_date", "admissions", "evidence")
    admission = pristine["admissions"].loc[admission_row.row_id]
    assert admission["patient_id"] == pristine["patients"].at[died.row_id, "patient_id"]
    days = (datetime.strptime(admission["admit_time"][:10], DATE_FORMAT)
            - datetime.strptime(died.corrupted_value, DATE_FORMAT)).days
    assert 30 <= days <= 730


def check_unknown_admission(pristine, changes):
    (change,) = changes
    assert change.field == "admission_id"
    assert change.corrupted_value not in set(pristine["admissions"]["admission_id"])


def check_other_patients_admission(pristine, changes):
    (change,) = changes
    owner = pristine["admissions"].set_index("admission_id").at[change.corrupted_value, "patient_id"]
    assert owner != pristine[change.table].at[change.row_id, "patient_id"]


def check_unknown_code(pristine, changes):
    (change,) = changes
    dictionary = {"lab_results": ("lab_tests", "test_code"), "chart_observations": ("chart_items", "item_code")}
    table, column = dictionary[change.table]
    assert change.field == column
    assert change.corrupted_value not in set(pristine[table][column])


CHECKS = {
    "range_extreme": check_range_extreme, "decimal_shift": check_decimal_shift,
    "unit_confusion": check_unit_confusion, "unit_label_mismatch": check_unit_label_mismatch,
    "in_table_duplicate": check_in_table_duplicate, "cross_table_copy": check_cross_table_copy,
    "sex_flip": check_sex_flip, "opposite_sex_marker_drug": check_opposite_sex_marker_drug,
    "geriatric_drug_age": check_geriatric_drug_age,
    "discharge_before_admission": _check_hours_before("admissions", "discharge_time", "admit_time"),
    "stop_before_start": _check_hours_before("medication_orders", "stop_time", "start_time"),
    "death_before_admission": check_death_before_admission,
    "unknown_admission": check_unknown_admission, "other_patients_admission": check_other_patients_admission,
    "unknown_code": check_unknown_code,
}


def assert_same_rows(left: pd.DataFrame, right: pd.DataFrame) -> None:
    """The same rows, ids and text cells in the same order (dtypes aside)."""
    assert list(left.columns) == list(right.columns)
    assert list(left.index) == list(right.index)
    assert left.values.tolist() == right.values.tolist()


def check_cluster(pristine, result, labels, changes, cluster_id):
    """What any committed error must satisfy: labels mirror the changes, corrupted fields hold their value (and
    only that field changed), inserted rows exist, evidence rows are as they were."""
    assert [(label.table, label.row_id, label.role) for label in labels] == [
        (change.table, change.row_id, change.role) for change in changes]
    assert {label.cluster_id for label in labels} == {cluster_id}
    for change in changes:
        assert re.fullmatch(r"[0-9a-f]{16}", change.row_id)
        frame = result[change.table]
        if change.role == "corrupted":
            before, after = row_values(pristine[change.table], change.row_id), row_values(frame, change.row_id)
            assert after[change.field] == change.corrupted_value
            assert before[change.field] == change.original_value != change.corrupted_value
            assert {c for c in before if before[c] != after[c]} == {change.field}
        elif change.role == "inserted":
            assert change.row_id not in pristine[change.table].index
            written = row_values(frame, change.row_id)
            assert written == {ROW_ID: change.row_id, **change.row}
            assert change.row_id == row_id(change.table, change.row.values())
            if change.field is not None:
                assert written[change.field] == change.corrupted_value
        else:
            assert row_values(frame, change.row_id) == row_values(pristine[change.table], change.row_id)
    for table, frame in result.items():  # nothing else changed
        touched = {change.row_id for change in changes if change.table == table}
        kept = frame.drop(index=[i for i in touched if i in frame.index])
        untouched = pristine[table].drop(index=[i for i in touched if i in pristine[table].index])
        assert_same_rows(kept, untouched)


def test_every_subtype_has_a_meaning_check():
    assert set(CHECKS) == {subtype for _, subtype in all_subtypes()} == set(SUBTYPES)


@pytest.mark.parametrize(("family", "subtype"), all_subtypes())
@pytest.mark.parametrize("seed", range(4))
def test_one_error_of_each_subtype_is_labelled_as_what_happened(extract, family, subtype, seed):
    corruption = Corruption(extract, "t")
    changes = INJECTORS[family][subtype].inject(scope_of(corruption, family, subtype), np.random.default_rng(seed))
    assert changes, f"{family}/{subtype} found no row in the hand-made extract"
    cluster_id = corruption.commit(family, subtype, changes)
    assert cluster_id == "t-001"
    assert {(label.family, label.subtype) for label in corruption.labels} == {(family, subtype)}
    result = corruption.result()
    check_cluster(extract, result, corruption.labels, changes, cluster_id)
    CHECKS[subtype](extract, changes)
    if subtype == "sex_flip":  # nothing taken yet: every sex-specific row of the patient is evidence
        patient = extract["patients"].at[changes[0].row_id, "patient_id"]
        assert {(c.table, c.row_id) for c in changes[1:]} == sex_specific_rows(extract, patient,
                                                                               changes[0].original_value)


@pytest.mark.slow  # a sweep: every sub-type over many seeds
@pytest.mark.parametrize(("family", "subtype"), all_subtypes())
def test_the_meaning_holds_over_many_seeds(extract, family, subtype):
    """The drawn numbers (factors, minutes, hours, days, ids) stay in their ranges over many draws."""
    for seed in range(40):
        corruption = Corruption(extract, "t")
        changes = INJECTORS[family][subtype].inject(scope_of(corruption, family, subtype),
                                                    np.random.default_rng(1000 + seed))
        assert changes, f"{family}/{subtype} found no row with seed {1000 + seed}"
        CHECKS[subtype](extract, changes)


def test_the_pristine_extract_is_not_modified_by_a_corruption(extract):
    before = {table: frame.copy() for table, frame in extract.items()}
    corruption = Corruption(extract, "t")
    for family, subtype in all_subtypes():
        changes = INJECTORS[family][subtype].inject(scope_of(corruption, family, subtype), np.random.default_rng(1))
        if changes:
            corruption.commit(family, subtype, changes)
    corruption.result()
    for table in extract:
        pd.testing.assert_frame_equal(extract[table], before[table])


# --- a row is part of one error at most ---

def test_many_errors_never_share_a_row(extract):
    corruption = Corruption(extract, "t")
    rng = np.random.default_rng(2024)
    committed = []
    for _ in range(8):
        for family, subtype in all_subtypes():
            changes = INJECTORS[family][subtype].inject(scope_of(corruption, family, subtype), rng)
            if changes:
                corruption.commit(family, subtype, changes)
                committed.append((subtype, changes))
    assert len(committed) >= 40  # the extract is used up, not barely touched
    for subtype, changes in committed:  # each error still means what it says among the others
        CHECKS[subtype](extract, changes)
    cluster_of: dict[tuple[str, str], str] = {}
    for label in corruption.labels:
        key = (label.table, label.row_id)
        assert cluster_of.setdefault(key, label.cluster_id) == label.cluster_id, f"{key} is in two clusters"
    result = corruption.result()
    for table, frame in result.items():  # inserted rows sit among their neighbours, in the table's order
        assert list(frame.index) == list(sort_rows(table, frame).index)
    for label in corruption.labels:  # every label still holds after all later errors
        assert label.row_id in result[label.table].index
        if label.role != "evidence":
            assert result[label.table].at[label.row_id, label.field] == label.corrupted_value
        else:
            assert row_values(result[label.table], label.row_id) == row_values(extract[label.table], label.row_id)


def test_a_subtype_runs_out_of_rows_instead_of_reusing_them(extract):
    corruption = Corruption(extract, "t")
    scope = scope_of(corruption, "demographic_contradiction", "sex_flip")
    rng = np.random.default_rng(0)
    flipped = []
    while (changes := INJECTORS["demographic_contradiction"]["sex_flip"].inject(scope, rng)) is not None:
        corruption.commit("demographic_contradiction", "sex_flip", changes)
        flipped.append(extract["patients"].at[changes[0].row_id, "patient_id"])
    assert sorted(flipped) == [P1, P3]  # the two patients with sex-specific rows, once each


def test_commit_refuses_a_row_already_part_of_an_error(extract):
    corruption = Corruption(extract, "t")
    lab = extract["lab_results"].index[0]
    order = extract["medication_orders"].index[0]
    corruption.commit("impossible_values", "range_extreme",
                      [Change("lab_results", lab, "corrupted", "value", extract["lab_results"].at[lab, "value"],
                              "999.0")])
    corruption.commit("temporal_violation", "stop_before_start", [Change("medication_orders", order, "evidence")])
    labels = list(corruption.labels)
    for change in (Change("lab_results", lab, "corrupted", "value", "999.0", "1.0"),
                   Change("lab_results", lab, "evidence"), Change("medication_orders", order, "evidence")):
        other = extract["admissions"].index[0]
        with pytest.raises(AssertionError, match="already part of an error"):
            corruption.commit("x", "y", [Change("admissions", other, "evidence"), change])
        assert corruption.labels == labels and corruption.clusters == 2  # nothing of the refused error applied
        assert not corruption.is_claimed("admissions", other)
    assert corruption.result()["lab_results"].at[lab, "value"] == "999.0"
    assert lab not in corruption.available("lab_results").index


# --- inject_task: seeded, reproducible, shortfalls reported ---

def every_family_task(count: int = 2, seed: int = 0, task_id: str = "combined") -> TaskRecipe:
    return TaskRecipe(id=task_id, recipes=[
        Recipe(family=family, subtypes=list(injectors), count=count, seed=seed + n)
        for n, (family, injectors) in enumerate(INJECTORS.items())])


def test_same_seed_same_task_and_another_seed_other_picks(extract):
    task = every_family_task()
    first, again, other = (inject_task(extract, task, seed) for seed in (7, 7, 8))
    assert first.labels == again.labels
    for table in first.tables:
        pd.testing.assert_frame_equal(first.tables[table], again.tables[table])
    assert first.clusters >= 20 and first.shortfalls == again.shortfalls
    assert other.labels != first.labels
    assert {(x.table, x.row_id) for x in other.labels} != {(x.table, x.row_id) for x in first.labels}
    assert {label.cluster_id for label in first.labels} == {f"combined-{n:03d}" for n in range(1, first.clusters + 1)}


def test_changing_one_recipe_moves_no_other_recipes_errors(extract):
    """Each (task, recipe, sub-type) has its own generator: the first recipe's picks survive a change to a later
    recipe's seed (the later recipe's own picks may differ)."""
    base = TaskRecipe(id="t", recipes=[
        Recipe(family="impossible_values", subtypes=["range_extreme"], count=2, seed=1),
        Recipe(family="temporal_violation", subtypes=["stop_before_start"], count=1, seed=2)])
    changed = base.model_copy(update={"recipes": [base.recipes[0], base.recipes[1].model_copy(update={"seed": 9})]})
    first = [lab for lab in inject_task(extract, base, 3).labels if lab.subtype == "range_extreme"]
    second = [lab for lab in inject_task(extract, changed, 3).labels if lab.subtype == "range_extreme"]
    assert first == second and len(first) == 2


def test_shortfalls_are_reported_not_raised(extract):
    no_icu = dict(extract)
    no_icu["icu_stays"] = extract["icu_stays"].iloc[0:0]
    task = TaskRecipe(id="short", recipes=[
        Recipe(family="inconsistency", subtypes=["cross_table_copy", "in_table_duplicate"], count=3, seed=1),
        Recipe(family="demographic_contradiction", subtypes=["sex_flip"], count=5, seed=2)])
    injected = inject_task(no_icu, task, 0)
    assert injected.shortfalls == {"inconsistency/cross_table_copy": 3, "demographic_contradiction/sex_flip": 3}
    assert [label.subtype for label in injected.labels].count("in_table_duplicate") == 2 * 3
    assert injected.clusters == 3 + 2


def test_a_patient_sample_keeps_errors_within_it(extract):
    task = TaskRecipe(id="sample", recipes=[Recipe(family="temporal_violation", subtypes=[
        "discharge_before_admission", "stop_before_start"], count=5, seed=0, patients=1)])
    injected = inject_task(extract, task, 11)
    patients = {injected.tables[label.table].at[label.row_id, "patient_id"] for label in injected.labels}
    assert len(patients) == 1
    assert injected.shortfalls  # one patient has 2 admissions and at most 2 orders: 5 of each cannot all be made


def test_recipe_tables_limit_what_is_corrupted(extract):
    task = TaskRecipe(id="only_chart", recipes=[Recipe(
        family="impossible_values", subtypes=["range_extreme", "decimal_shift"], tables=["chart_observations"],
        count=3, seed=4)])
    injected = inject_task(extract, task, 5)
    assert injected.labels and {label.table for label in injected.labels} == {"chart_observations"}


# --- recipes ---

def test_the_default_recipes_load_and_name_known_subtypes():
    book = load_recipes()
    assert book.tasks and len({task.id for task in book.tasks}) == len(book.tasks)
    assert {(r.family, s) for task in book.tasks for r in task.recipes for s in r.subtypes} == set(all_subtypes())
    assert load_recipes(DEFAULT_RECIPES) == book


def recipe_file(tmp_path: Path, tasks: list[dict]) -> Path:
    path = tmp_path / "recipes.yaml"
    path.write_text(yaml.safe_dump({"tasks": tasks}))
    return path


def one_task(task_id: str = "a", **recipe) -> dict:
    return {"id": task_id, "recipes": [{"family": "impossible_values", "subtypes": ["range_extreme"], "count": 1,
                                        **recipe}]}


@pytest.mark.parametrize(("tasks", "problem"), [
    ([one_task(family="impossible_value")], "unknown family 'impossible_value'"),
    ([one_task(subtypes=["range_extreme", "range_extremes"])], "no sub-type 'range_extremes'"),
    ([one_task(tables=["patients"])], "corrupts lab_results, chart_observations, none of the recipe's tables"),
    ([one_task(tables=["lab_results", "admissions"])], "cannot corrupt table(s) admissions"),
    ([one_task(family="temporal_violation", subtypes=["stop_before_start"], tables=["medication_orders", "labs"])],
     "cannot corrupt table(s) labs"),
    ([one_task("a"), one_task("b"), one_task("a")], "task id(s) a appear more than once"),
    ([one_task(count=0)], "tasks.0.recipes.0.count"),
    ([one_task("Bad-Id")], "tasks.0.id"),
])
def test_a_bad_recipe_file_names_the_file_and_the_problem(tmp_path, tasks, problem):
    path = recipe_file(tmp_path, tasks)
    with pytest.raises(ValueError) as raised:
        load_recipes(path)
    assert str(path) in str(raised.value)
    assert problem in str(raised.value)


def test_broken_yaml_names_the_file(tmp_path):
    path = tmp_path / "recipes.yaml"
    path.write_text("tasks:\n  - id: a\n    recipes: [family: x\n")
    with pytest.raises(ValueError, match=r"recipes\.yaml: not YAML"):
        load_recipes(path)


def test_recipes_load_from_a_good_file(tmp_path):
    book = load_recipes(recipe_file(tmp_path, [one_task(tables=["chart_observations"], patients=3, seed=2)]))
    recipe = book.tasks[0].recipes[0]
    assert (recipe.tables, recipe.patients, recipe.seed, book.extract.patients) == (["chart_observations"], 3, 2, 100)


def test_a_missing_recipe_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.yaml"):
        load_recipes(tmp_path / "nowhere.yaml")


# --- task folders ---

def files_of(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.fixture(scope="module")
def injected(pristine):
    return inject_task(pristine, every_family_task(count=1, task_id="combined"), 42)


def test_a_task_is_written_in_both_variants_byte_for_byte_reproducibly(tmp_path, extract, injected):
    written = write_task(injected, tmp_path / "one" / "dq", 42)
    assert [(w.task_id, w.variant) for w in written] == [("combined", "base"), ("combined_clues", "clues")]
    again = write_task(inject_task(extract, every_family_task(count=1, task_id="combined"), 42),
                       tmp_path / "two" / "dq", 42)
    first, second = files_of(tmp_path / "one" / "dq"), files_of(tmp_path / "two" / "dq")
    expected = {f"{folder}/{name}" for folder in ("combined", "combined_clues") for name in
                ["instruction.md", "gold/labels.parquet", "gold/task.json",
                 *(f"data/{table}.csv.gz" for table in TABLE_ORDER)]}
    assert set(first) == expected
    assert first == second
    assert written[0].clusters == injected.clusters and len(again) == 2
    labels = pq.read_table(tmp_path / "one" / "dq" / "combined" / "gold" / "labels.parquet").to_pylist()
    assert len(labels) == len(injected.labels) == written[0].labelled_rows
    assert {(r["table"], r["row_id"], r["cluster_id"]) for r in labels} == {
        (label.table, label.row_id, label.cluster_id) for label in injected.labels}


def test_written_tables_hold_the_corrupted_copy_as_text(tmp_path, injected):
    folder = write_task(injected, tmp_path / "dq", 42)[0].folder
    for table, frame in injected.tables.items():
        with gzip.open(folder / "data" / f"{table}.csv.gz", "rt") as handle:
            written = pd.read_csv(handle, dtype=str, keep_default_na=False)
        assert list(written.columns) == [ROW_ID, *COLUMNS[table]]
        assert written.values.tolist() == frame.fillna("").values.tolist()


def test_only_the_clues_variant_names_the_subtypes(tmp_path, injected):
    written = write_task(injected, tmp_path / "dq", 42)
    base_text = (written[0].folder / "instruction.md").read_text()
    clues_text = (written[1].folder / "instruction.md").read_text()
    injected_subtypes = {label.subtype for label in injected.labels}
    assert len(injected_subtypes) >= 10
    for subtype, description in SUBTYPES.items():
        assert description not in base_text
        assert (description in clues_text) == (subtype in injected_subtypes)
    assert "sub-types" not in base_text and "sub-types" in clues_text
    for text in (base_text, clues_text):
        for table in TABLE_ORDER:
            assert f"`{table}`" in text


def test_forbidden_names_are_found_in_a_data_cell_or_the_instruction(tmp_path, injected):
    folder = write_task(injected, tmp_path / "dq", 42)[0].folder
    assert forbidden_names(folder) == []
    path = folder / "data" / "medication_orders.csv.gz"
    text = gzip.decompress(path.read_bytes()).decode().replace("Heparin", "MIMIC Heparin")
    path.write_bytes(gzip.compress(text.encode()))
    (folder / "instruction.md").write_text((folder / "instruction.md").read_text() + "\nFrom PhysioNet.\n")
    found = forbidden_names(folder)
    assert any("medication_orders.csv.gz" in problem and "'mimic'" in problem for problem in found)
    assert any("instruction.md" in problem and "'physionet'" in problem for problem in found)
    assert forbidden_names(folder, data=False) == [p for p in found if "instruction.md" in p]


def test_a_source_name_in_the_extract_fails_the_written_task(tmp_path, extract):
    rows = rows_of_extract()
    rows["lab_tests"][0]["name"] = "Creatinine (MIMIC-IV)"
    task = every_family_task(count=1)
    with pytest.raises(ValidationError, match="mimic"):
        write_task(inject_task(tables_of(rows), task, 1), tmp_path / "dq", 1)


def test_verify_catches_a_label_that_does_not_match_the_written_file(tmp_path, injected):
    folder = write_task(injected, tmp_path / "dq", 42)[0].folder
    verify_task(folder, injected.labels)  # as written: fine
    at = next(n for n, label in enumerate(injected.labels) if label.role == "corrupted")
    tampered = list(injected.labels)
    tampered[at] = dataclasses.replace(tampered[at], corrupted_value="12345.6")
    with pytest.raises(ValidationError, match="expected '12345.6'"):
        verify_task(folder, tampered)
    missing = [*injected.labels, dataclasses.replace(injected.labels[0], row_id="0" * 16)]
    with pytest.raises(ValidationError, match="has no row 0000000000000000"):
        verify_task(folder, missing)


def test_the_oracle_of_a_written_task_passes(tmp_path, injected):
    for written in write_task(injected, tmp_path / "dq", 42):
        oracle = write_oracle(written.folder, tmp_path / f"{written.task_id}.csv")
        result = score_task(written.folder, oracle)
        assert (result.recall, result.precision, result.passed) == (1.0, 1.0, True)
        assert result.clusters == injected.clusters == result.clusters_caught


# --- row ids ---

def test_row_id_is_the_first_16_hex_of_sha1_of_the_pristine_text():
    expected = hashlib.sha1(b"patients|10000032|M|2079-02-11|").hexdigest()[:16]
    assert row_id("patients", ["10000032", "M", "2079-02-11", None]) == expected


def test_every_pristine_row_id_is_the_hash_of_its_text_values(extract):
    for table, frame in extract.items():
        assert frame.index.is_unique
        for rid, values in zip(frame[ROW_ID], frame.drop(columns=ROW_ID).itertuples(index=False, name=None),
                               strict=True):
            assert re.fullmatch(r"[0-9a-f]{16}", rid)
            assert rid == row_id(table, values)
        assert list(frame.index) == list(frame[ROW_ID])


def test_identical_pristine_rows_get_different_ids():
    row = ["10000032", "21000012", "50912", "2150-01-03 06:00:00", "1.2", "mg/dL", None, None, None, "ROUTINE"]
    frame = pd.DataFrame([row, row, row], columns=COLUMNS["lab_results"], dtype=object)
    ids = list(with_row_ids("lab_results", frame)[ROW_ID])
    assert len(set(ids)) == 3
    assert ids[0] == row_id("lab_results", row)
    assert ids[1:] == [row_id("lab_results", [*row, 2]), row_id("lab_results", [*row, 3])]
    assert all(re.fullmatch(r"[0-9a-f]{16}", rid) for rid in ids)


def test_row_ids_survive_corruption(extract):
    injected = inject_task(extract, every_family_task(count=1), 3)
    for table, frame in injected.tables.items():
        inserted = {label.row_id for label in injected.labels if label.table == table and label.role == "inserted"}
        assert set(frame.index) == set(extract[table].index) | inserted
        assert list(frame.index) == list(frame[ROW_ID])


# --- edge cases (each once a bug), on minimal extracts ---

def single_row_extract(table: str, **cells) -> dict[str, pd.DataFrame]:
    """The hand-made extract with `table` reduced to one row (the other measurement table emptied)."""
    rows = rows_of_extract()
    rows[table] = [{**rows[table][0], **cells}]
    other = {"lab_results": "chart_observations", "chart_observations": "lab_results"}.get(table)
    if other:
        rows[other] = []
    return tables_of(rows)


def test_decimal_shift_of_a_zero_value_is_skipped_not_a_crash():
    tables = single_row_extract("chart_observations", item_code="220277", value="0.0", unit="%")
    corruption = Corruption(tables, "t")
    changes = INJECTORS["impossible_values"]["decimal_shift"].inject(
        scope_of(corruption, "impossible_values", "decimal_shift"), np.random.default_rng(0))
    assert changes is None


def test_unit_confusion_never_writes_the_original_value():
    tables = single_row_extract("lab_results", test_code="50912", value="0.0")
    corruption = Corruption(tables, "t")
    changes = INJECTORS["impossible_values"]["unit_confusion"].inject(
        scope_of(corruption, "impossible_values", "unit_confusion"), np.random.default_rng(0))
    assert changes is None or changes[0].corrupted_value != changes[0].original_value


def test_unit_confusion_writes_a_value_outside_the_band():
    tables = single_row_extract("lab_results", test_code="50931", value="175.0")
    corruption = Corruption(tables, "t")
    changes = INJECTORS["impossible_values"]["unit_confusion"].inject(
        scope_of(corruption, "impossible_values", "unit_confusion"), np.random.default_rng(0))
    # 175 x 0.0555 is written '10.0' in whole glucose values: inside the band, so the row does not qualify
    assert changes is None or is_outside("lab_results", "50931", num(changes[0].corrupted_value))


class _Hang(Exception):
    pass


def _run_with_alarm(seconds: float, function):
    def alarm(signum, frame):
        raise _Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return function()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_unknown_admission_with_no_free_id_in_the_span_does_not_hang():
    rows = rows_of_extract()
    rows["admissions"] = [r for r in rows["admissions"] if r["admission_id"] == "21000012"]
    tables = tables_of(rows)
    corruption = Corruption(tables, "t")
    changes = _run_with_alarm(0.5, lambda: INJECTORS["orphan_reference"]["unknown_admission"].inject(
        scope_of(corruption, "orphan_reference", "unknown_admission"), np.random.default_rng(0)))
    assert changes is None or changes[0].corrupted_value not in {"21000012"}


def test_marker_drug_starts_within_an_admission_admitted_at_whole_seconds():
    rows = rows_of_extract()
    rows["patients"] = rows["patients"][:1]
    rows["admissions"] = [dict(admission_id="21000012", patient_id=P1, admit_time="2150-01-02 08:00:30",
                               discharge_time="2150-01-02 08:01:40", age_at_admission="71")]
    tables = tables_of(rows)
    corruption = Corruption(tables, "t")
    changes = INJECTORS["demographic_contradiction"]["opposite_sex_marker_drug"].inject(
        scope_of(corruption, "demographic_contradiction", "opposite_sex_marker_drug"), np.random.default_rng(0))
    assert changes[0].row["start_time"] >= "2150-01-02 08:00:30"


def test_a_duplicate_identical_to_an_existing_row_is_not_inserted():
    rows = rows_of_extract()
    template = dict(patient_id=P1, admission_id="21000012", test_code="50912", unit="mg/dL", ref_low="0.5",
                    ref_high="1.2", priority="ROUTINE")
    original = {**template, "charted_at": "2150-01-03 06:00:00", "value": "1.0"}
    # every copy the injector can make of `original` (x1.1-1.5 in one decimal, 1-5 minutes either side) exists
    at = datetime.strptime(original["charted_at"], TIME_FORMAT)
    neighbours = [{**template, "charted_at": (at + timedelta(minutes=minutes)).strftime(TIME_FORMAT),
                   "value": f"{tenths / 10:.1f}"} for minutes in (-5, -4, -3, -2, -1, 1, 2, 3, 4, 5)
                  for tenths in range(11, 16)]
    rows["lab_results"] = [original, *neighbours]
    rows["chart_observations"] = []
    tables = tables_of(rows)
    corruption = Corruption(tables, "t")
    taken = [Change("lab_results", rid, "evidence") for rid in tables["lab_results"].index
             if tables["lab_results"].at[rid, "charted_at"] != original["charted_at"]]
    corruption.commit("x", "y", taken)  # only the original is left to copy
    scope = scope_of(corruption, "inconsistency", "in_table_duplicate")
    changes = INJECTORS["inconsistency"]["in_table_duplicate"].inject(scope, np.random.default_rng(0))
    if changes is not None:
        assert changes[1].row_id not in tables["lab_results"].index
        corruption.commit("inconsistency", "in_table_duplicate", changes)
    corruption.result()


# --- the extract read by DuckDB and the files formatted once per extract: the same bytes as the rules above ---

def warehouse_of(path: Path, rows: dict[str, list[dict]]) -> Path:
    """A warehouse holding the extract's rows as the dq models would (every cell text, so the cells read back as
    written)."""
    with duckdb.connect(str(path)) as con:
        con.execute(f"create schema {EXTRACT_SCHEMA}")
        for table in TABLE_ORDER:
            columns = ", ".join(f'"{c}" varchar' for c in COLUMNS[table])
            con.execute(f'create table {EXTRACT_SCHEMA}."{table}" ({columns})')
            if rows.get(table):
                marks = ", ".join("?" for _ in COLUMNS[table])
                con.executemany(f'insert into {EXTRACT_SCHEMA}."{table}" values ({marks})',
                                [[row.get(c) for c in COLUMNS[table]] for row in rows[table]])
    return path


def test_read_extract_gives_the_ids_and_order_of_the_published_rule(tmp_path):
    rows = rows_of_extract()
    lab = {**rows["lab_results"][0], "flag": None}
    rows["lab_results"] += [lab, lab]  # three identical rows (with the first): occurrence numbers 1, 2, 3
    rows["lab_results"].append({**lab, "patient_id": None, "charted_at": None})  # null keys sort first
    rows["medication_orders"].append({**rows["medication_orders"][0], "drug": "Zinc, \"chelated\""})
    first = rows["medication_orders"][0]  # sorted by patient, start time, drug: text in code point order
    rows["medication_orders"] += [{**first, "drug": drug} for drug in ("Äpfel", "apple", "Zebra")]
    extract = read_extract(warehouse_of(tmp_path / "warehouse.duckdb", rows))
    reference = tables_of(rows)  # with_row_ids and sort_rows: the rule in Python
    for table in TABLE_ORDER:
        pd.testing.assert_frame_equal(extract[table], reference[table], check_index_type=True)
        assert extract[table].index.name is None
    values = [lab.get(c) for c in COLUMNS["lab_results"]]
    ids = set(extract["lab_results"][ROW_ID])
    for occurrence in ("", "|2", "|3"):
        text = "lab_results|" + "|".join("" if v is None else v for v in values) + occurrence
        assert hashlib.sha1(text.encode()).hexdigest()[:16] in ids
    assert extract["lab_results"]["patient_id"].iloc[0] is None
    orders = extract["medication_orders"]
    same_start = orders[(orders["patient_id"] == first["patient_id"]) & (orders["start_time"] == first["start_time"])]
    assert [d for d in same_start["drug"] if d in ("Äpfel", "apple", "Zebra")] == ["Zebra", "apple", "Äpfel"]


def test_read_extract_shares_one_string_object_per_distinct_value(tmp_path):
    column = pa.chunked_array([pa.array(["mg/dL", None, "mg" + "/dL"]), pa.array(["mmol/L", "mg/dL", None]),
                               pa.array([], type=pa.string())])
    cells = shared_strings(column)
    assert cells.dtype == object and cells.tolist() == ["mg/dL", None, "mg/dL", "mmol/L", "mg/dL", None]
    assert cells[0] is cells[2] is cells[4]
    assert shared_strings(pa.chunked_array([pa.array([None, None], type=pa.string())])).tolist() == [None, None]
    rows = rows_of_extract()
    rows["lab_results"] += [{**rows["lab_results"][0], "value": "7.5"} for _ in range(2)]
    units = read_extract(warehouse_of(tmp_path / "warehouse.duckdb", rows))["lab_results"]["unit"].dropna()
    assert units.nunique() < len(units)
    assert len({id(unit) for unit in units}) == units.nunique()  # read cell by cell, each row had its own object


def reference_file(frame: pd.DataFrame) -> bytes:
    """What a task's table file must hold: the frame as pandas writes it, gzipped without name or time, level 4."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=4) as out:
        out.write(frame.to_csv(index=False, lineterminator="\n").encode())
    return buffer.getvalue()


@pytest.mark.parametrize("drug", ["Heparin", "Heparin, \"porcine\"", "Heparin\nflush"],
                         ids=["plain", "quoted", "newline"])
def test_task_files_are_the_frames_as_pandas_writes_them(tmp_path, drug):
    rows = rows_of_extract()
    rows["medication_orders"][1]["drug"] = drug  # a quoted cell, or one whose record spans two lines
    extract = tables_of(rows)
    files = ExtractFiles(extract)
    tasks = [inject_task(extract, every_family_task(count=1, task_id=f"t{seed}"), seed) for seed in (1, 2)]
    tasks.append(inject_task(extract, TaskRecipe(id="few", recipes=[Recipe(
        family="temporal_violation", subtypes=["discharge_before_admission"], count=1, seed=0)]), 0))
    for injected in tasks:
        folder = write_task(injected, tmp_path / "dq", 0, files)[0].folder
        touched = {label.table for label in injected.labels if label.role != "evidence"}
        for table, frame in injected.tables.items():
            written = (folder / "data" / f"{table}.csv.gz").read_bytes()
            assert written == reference_file(frame), (injected.task.id, table)
            if table not in touched:
                assert written == reference_file(extract[table])
    assert {label.table for label in tasks[-1].labels} == {"admissions"}


@pytest.mark.parametrize("seed", range(5))
def test_rows_merged_into_table_order_land_where_a_full_sort_puts_them(seed):
    rng = np.random.default_rng(seed)
    codes, times = ["50912", "50931", "51222", None], [f"2150-01-0{d} 06:00:00" for d in range(1, 4)] + [None]

    def rows(n: int) -> pd.DataFrame:
        frame = pd.DataFrame({c: [None] * n for c in COLUMNS["lab_results"]}, dtype=object)
        frame["patient_id"] = [[P1, P2, None][i] for i in rng.integers(3, size=n)]
        frame["test_code"] = [codes[i] for i in rng.integers(len(codes), size=n)]
        frame["charted_at"] = [times[i] for i in rng.integers(len(times), size=n)]
        frame["value"] = [str(v) for v in rng.integers(100, size=n)]
        return with_row_ids("lab_results", frame)

    ordered, extra = sort_rows("lab_results", rows(60)), rows(8)
    merged = merge_in_order("lab_results", ordered, extra)
    assert list(merged.index) == list(sort_rows("lab_results", pd.concat([ordered, extra])).index)
