"""Orphan references (ehrbench's own family): a row pointing at an admission or a code the extract does not have,
or at another patient's admission."""

from __future__ import annotations

import numpy as np

from ehrbench.dq.corruption import Change, pick
from ehrbench.dq.injectors import Injector, Scope

REFERRING = ("lab_results", "chart_observations", "medication_orders", "diagnoses")
DICTIONARY = {"lab_results": ("test_code", "lab_tests"), "chart_observations": ("item_code", "chart_items")}


def _referring_row(scope: Scope, rng: np.random.Generator, tables, column: str):
    for table in scope.tables_among(rng, tables):
        frame = scope.available(table)
        row = pick(rng, frame[frame[column].notna()])
        if row is not None:
            return table, row
    return None


def _absent_id(rng: np.random.Generator, present: set[str]) -> str | None:
    """An integer id that names nothing, drawn near the present ones (so it looks like one): from their span widened
    by their count, which always leaves more than half of it free."""
    numbers = sorted(int(value) for value in present if value.lstrip("-").isdigit())
    if not numbers:
        return None
    while True:
        candidate = str(int(rng.integers(numbers[0], numbers[-1] + len(numbers) + 2)))
        if candidate not in present:
            return candidate


def unknown_admission(scope: Scope, rng: np.random.Generator) -> list[Change] | None:
    """An admission id changed to one that no admission has."""
    found = _referring_row(scope, rng, REFERRING, "admission_id")
    if found is None:
        return None
    table, row = found
    absent = _absent_id(rng, set(scope.corruption.tables["admissions"]["admission_id"].dropna()))
    if absent is None:
        return None
    return [Change(table, row.name, "corrupted", "admission_id", row["admission_id"], absent)]


def other_patients_admission(scope: Scope, rng: np.random.Generator) -> list[Change] | None:
    """An admission id changed to an admission of another patient."""
    found = _referring_row(scope, rng, REFERRING, "admission_id")
    if found is None:
        return None
    table, row = found
    admissions = scope.corruption.tables["admissions"]
    others = sorted(admissions.loc[admissions["patient_id"] != row["patient_id"], "admission_id"].dropna())
    if not others:
        return None
    return [Change(table, row.name, "corrupted", "admission_id", row["admission_id"],
                   others[int(rng.integers(len(others)))])]


def unknown_code(scope: Scope, rng: np.random.Generator) -> list[Change] | None:
    """A lab test or chart item code changed to one its dictionary does not define."""
    for table in scope.tables_among(rng, DICTIONARY):
        column, dictionary = DICTIONARY[table]
        frame = scope.available(table)
        row = pick(rng, frame[frame[column].notna()])
        if row is not None:
            absent = _absent_id(rng, set(scope.corruption.tables[dictionary][column].dropna()))
            if absent is not None:
                return [Change(table, row.name, "corrupted", column, row[column], absent)]
    return None


INJECTORS = {
    "unknown_admission": Injector(REFERRING, unknown_admission),
    "other_patients_admission": Injector(REFERRING, other_patients_admission),
    "unknown_code": Injector(tuple(DICTIONARY), unknown_code),
}
