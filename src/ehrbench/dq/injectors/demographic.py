"""Demographic contradictions: a patient's recorded sex or age that the rest of the record contradicts."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pandas as pd

from ehrbench.dq.corruption import Change, pick
from ehrbench.dq.extract import TIME_FORMAT
from ehrbench.dq.facts import ClinicalFacts
from ehrbench.dq.injectors import Injector, Scope

OTHER_SEX = {"F": "M", "M": "F"}
IMPLAUSIBLE_AGE = "5"  # docs/benchmarks.md#data-quality-error-injection: age set to 5 for a patient on geriatric drugs


def _drug_matches(drugs: pd.Series, names: list[str]) -> pd.Series:
    lowered = drugs.fillna("").str.lower()
    matched = pd.Series(False, index=drugs.index)
    for name in names:
        matched |= lowered.str.contains(name.lower(), regex=False)
    return matched


def sex_evidence(scope: Scope, facts: ClinicalFacts) -> list[tuple[str, str, str]]:
    """(table, row id, patient id) of unclaimed rows that only a patient of the recorded sex can have."""
    patients = scope.available("patients").set_index("patient_id")["sex"]
    found: list[tuple[str, str, str]] = []
    diagnoses = scope.available("diagnoses")
    orders = scope.available("medication_orders")
    labs = scope.available("lab_results")
    for sex, evidence in facts.sex_specific.items():
        own = diagnoses["patient_id"].map(patients) == sex
        codes = pd.Series(False, index=diagnoses.index)
        for version, prefixes in evidence.icd.items():
            codes |= (diagnoses["icd_version"] == str(version)) & diagnoses["icd_code"].fillna("").str.startswith(
                tuple(prefixes))
        found += [("diagnoses", i, p) for i, p in diagnoses.loc[own & codes, "patient_id"].items()]
        own = orders["patient_id"].map(patients) == sex
        found += [("medication_orders", i, p)
                  for i, p in orders.loc[own & _drug_matches(orders["drug"], evidence.drugs), "patient_id"].items()]
        own = labs["patient_id"].map(patients) == sex
        tests = labs["test_code"].isin([str(code) for code in evidence.lab_tests])
        found += [("lab_results", i, p) for i, p in labs.loc[own & tests, "patient_id"].items()]
    return found


def sex_flip(scope: Scope, rng: np.random.Generator) -> list[Change] | None:
    """The sex of a patient flipped where the record holds sex-specific evidence (a prostate diagnosis, a
    pregnancy, finasteride, a PSA test); the cluster is the patient row and every evidence row."""
    evidence = sex_evidence(scope, scope.facts)
    candidates = sorted({patient for _, _, patient in evidence})
    if not candidates:
        return None
    patient_id = candidates[int(rng.integers(len(candidates)))]
    patients = scope.available("patients")
    row = patients[patients["patient_id"] == patient_id].iloc[0]
    return [Change("patients", row.name, "corrupted", "sex", row["sex"], OTHER_SEX[row["sex"]]),
            *(Change(table, row_id, "evidence") for table, row_id, patient in sorted(evidence)
              if patient == patient_id)]


def _minute_within(rng: np.random.Generator, start: str, end: str | None) -> datetime:
    """A whole minute (orders are written on the minute) from `start` to `end` (a day when it is unknown)."""
    first = datetime.strptime(start, TIME_FORMAT)
    if first.second:
        first = first.replace(second=0) + timedelta(minutes=1)
    last = datetime.strptime(end, TIME_FORMAT) if end else first + timedelta(days=1)
    minutes = max(int((last - first).total_seconds() // 60), 0)
    return first + timedelta(minutes=int(rng.integers(minutes + 1)))


def opposite_sex_marker_drug(scope: Scope, rng: np.random.Generator) -> list[Change] | None:
    """An order of a drug only the other sex receives (finasteride for a woman, prenatal vitamins for a man) added
    to one of the patient's admissions; the cluster is the order and the patient row."""
    patients = scope.available("patients")
    admissions = scope.available("admissions")
    admissions = admissions[admissions["admit_time"].notna()]
    patients = patients[patients["sex"].isin(OTHER_SEX) & patients["patient_id"].isin(admissions["patient_id"])]
    patient = pick(rng, patients)
    if patient is None:
        return None
    admission = pick(rng, admissions[admissions["patient_id"] == patient["patient_id"]])
    markers = scope.facts.marker_orders[OTHER_SEX[patient["sex"]]]
    marker = markers[int(rng.integers(len(markers)))]
    start = _minute_within(rng, admission["admit_time"], admission["discharge_time"])
    order = scope.corruption.new_row("medication_orders", {
        "patient_id": patient["patient_id"], "admission_id": admission["admission_id"],
        "start_time": start.strftime(TIME_FORMAT),
        "stop_time": (start + timedelta(days=int(rng.integers(1, 4)))).strftime(TIME_FORMAT),
        "drug_type": "MAIN", **marker.model_dump()})
    return [Change("medication_orders", order.row_id, "inserted", "drug", None, marker.drug, order.row),
            Change("patients", patient.name, "evidence")]


def geriatric_drug_age(scope: Scope, rng: np.random.Generator) -> list[Change] | None:
    """The age at an admission set to 5 where the patient was given geriatric drugs (donepezil, tamsulosin, ...)
    during it; the cluster is the admission row and those orders."""
    orders = scope.available("medication_orders")
    orders = orders[orders["admission_id"].notna() & _drug_matches(orders["drug"], scope.facts.geriatric_drugs)]
    admissions = scope.available("admissions")
    admissions = admissions[admissions["admission_id"].isin(orders["admission_id"])
                            & (admissions["age_at_admission"] != IMPLAUSIBLE_AGE)]
    admission = pick(rng, admissions)
    if admission is None:
        return None
    given = orders[orders["admission_id"] == admission["admission_id"]]
    return [Change("admissions", admission.name, "corrupted", "age_at_admission", admission["age_at_admission"],
                   IMPLAUSIBLE_AGE),
            *(Change("medication_orders", row_id, "evidence") for row_id in given.index)]


INJECTORS = {
    "sex_flip": Injector(("patients",), sex_flip),
    "opposite_sex_marker_drug": Injector(("medication_orders",), opposite_sex_marker_drug),
    "geriatric_drug_age": Injector(("admissions",), geriatric_drug_age),
}
