"""Inconsistencies: the same measurement recorded twice with values that cannot both be true."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd

from ehrbench.dq.corruption import Change, moved, number, pick
from ehrbench.dq.extract import CODE_COLUMN
from ehrbench.dq.injectors import Injector, Scope
from ehrbench.dq.injectors.values import MEASUREMENTS

DUPLICATE_FACTOR = (1.10, 1.50)  # docs/benchmarks.md#data-quality-error-injection
DUPLICATE_JITTER_MINUTES = 5  # whole minutes: the source charts on the minute
COPY_FACTOR = (1.30, 1.70)
ATTEMPTS = 20  # draws of a row whose changed copy is new


def in_table_duplicate(scope: Scope, rng: np.random.Generator) -> list[Change] | None:
    """A row repeated in its table with the value x U(1.10, 1.50) (in the code's precision) and the time moved by
    1-5 whole minutes; the cluster is both rows. Drawn again when the value rounds back to itself or the copy
    equals a row the table has."""
    for table in scope.tables_among(rng, MEASUREMENTS):
        frame = scope.available(table)
        frame = frame[frame["charted_at"].notna() & (pd.to_numeric(frame["value"]) > 0)]
        for _ in range(ATTEMPTS):
            row = pick(rng, frame)
            if row is None:
                break
            value = number(float(row["value"]) * rng.uniform(*DUPLICATE_FACTOR),
                           scope.corruption.precision(table, row[CODE_COLUMN[table]]))
            minutes = int(rng.integers(1, DUPLICATE_JITTER_MINUTES + 1)) * (1 if rng.random() < 0.5 else -1)
            copy = scope.corruption.new_row(table, {**row.to_dict(), "value": value, "charted_at": moved(
                row["charted_at"], timedelta(minutes=minutes))})
            if float(value) != float(row["value"]) and not scope.corruption.has_row(table, copy.row_id):
                return [Change(table, row.name, "evidence"),
                        Change(table, copy.row_id, "inserted", "value", row["value"], value, copy.row)]
    return None


def cross_table_copy(scope: Scope, rng: np.random.Generator) -> list[Change] | None:
    """A lab result copied into the bedside chart under its chart item (glucose 50931 -> 225664, ...), same time,
    value x U(1.30, 1.70), in the ICU stay the result falls in; the cluster is the lab row and the chart row."""
    if "chart_observations" not in scope.tables:
        return None
    mapping = {str(lab): str(chart) for lab, chart in scope.facts.lab_to_chart.items()}
    labs = scope.available("lab_results")
    labs = labs[labs["test_code"].isin(mapping) & labs["charted_at"].notna() & (pd.to_numeric(labs["value"]) > 0)]
    stays = scope.corruption.tables["icu_stays"][["patient_id", "admission_id", "stay_id", "in_time", "out_time"]]
    during = labs.reset_index(names="lab_row").merge(stays, on="patient_id", suffixes=("", "_stay"))
    during = during[(during["in_time"] <= during["charted_at"]) & (during["charted_at"] <= during["out_time"])]
    during = during.drop_duplicates("lab_row").set_index("lab_row", drop=False)
    row = pick(rng, during)
    if row is None:
        return None
    lab = labs.loc[row["lab_row"]]
    item = mapping[lab["test_code"]]
    charted = scope.corruption.tables["chart_observations"]
    units = charted.loc[charted["item_code"] == item, "unit"].dropna()
    value = number(float(lab["value"]) * rng.uniform(*COPY_FACTOR),
                   scope.corruption.precision("chart_observations", item))
    copy = scope.corruption.new_row("chart_observations", {
        "patient_id": lab["patient_id"], "admission_id": row["admission_id_stay"], "stay_id": row["stay_id"],
        "item_code": item, "charted_at": lab["charted_at"], "value": value,
        "unit": units.mode().iloc[0] if not units.empty else None})
    if scope.corruption.has_row("chart_observations", copy.row_id):
        return None  # the chart already holds exactly this row
    return [Change("lab_results", lab.name, "evidence"),
            Change("chart_observations", copy.row_id, "inserted", "value", lab["value"], value, copy.row)]


INJECTORS = {
    "in_table_duplicate": Injector(MEASUREMENTS, in_table_duplicate),
    "cross_table_copy": Injector(("chart_observations",), cross_table_copy),
}
