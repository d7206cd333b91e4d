"""Temporal violations (ehrbench's own family): times in an order that cannot happen."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from ehrbench.dq.corruption import Change, moved, pick
from ehrbench.dq.extract import DATE_FORMAT, TIME_FORMAT
from ehrbench.dq.injectors import Injector, Scope


def _hours_before(rng: np.random.Generator, time: str) -> str:
    return moved(time, -timedelta(minutes=int(rng.integers(60, 72 * 60 + 1))))


def discharge_before_admission(scope: Scope, rng: np.random.Generator) -> list[Change] | None:
    """The discharge time moved to 1-72 hours before the admission time."""
    admissions = scope.available("admissions")
    row = pick(rng, admissions[admissions["admit_time"].notna() & admissions["discharge_time"].notna()])
    if row is None:
        return None
    return [Change("admissions", row.name, "corrupted", "discharge_time", row["discharge_time"],
                   _hours_before(rng, row["admit_time"]))]


def stop_before_start(scope: Scope, rng: np.random.Generator) -> list[Change] | None:
    """A medication order's stop time moved to 1-72 hours before its start."""
    orders = scope.available("medication_orders")
    row = pick(rng, orders[orders["start_time"].notna() & orders["stop_time"].notna()])
    if row is None:
        return None
    return [Change("medication_orders", row.name, "corrupted", "stop_time", row["stop_time"],
                   _hours_before(rng, row["start_time"]))]


def death_before_admission(scope: Scope, rng: np.random.Generator) -> list[Change] | None:
    """The date of death set to 30-730 days before the patient's last admission; the cluster is the patient row
    and that admission."""
    admissions = scope.available("admissions")
    admissions = admissions[admissions["admit_time"].notna()]
    patients = scope.available("patients")
    patient = pick(rng, patients[patients["patient_id"].isin(admissions["patient_id"])])
    if patient is None:
        return None
    last = admissions[admissions["patient_id"] == patient["patient_id"]].sort_values("admit_time").iloc[-1]
    died = datetime.strptime(last["admit_time"], TIME_FORMAT) - timedelta(days=int(rng.integers(30, 731)))
    return [Change("patients", patient.name, "corrupted", "death_date", patient["death_date"],
                   died.strftime(DATE_FORMAT)),
            Change("admissions", last.name, "evidence")]


INJECTORS = {
    "discharge_before_admission": Injector(("admissions",), discharge_before_admission),
    "stop_before_start": Injector(("medication_orders",), stop_before_start),
    "death_before_admission": Injector(("patients",), death_before_admission),
}
