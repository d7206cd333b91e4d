"""Impossible values: a measurement outside what a body can produce, or a unit that cannot hold it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ehrbench.dq.corruption import Change, number, pick
from ehrbench.dq.extract import CODE_COLUMN
from ehrbench.dq.injectors import Injector, Scope

MEASUREMENTS = tuple(CODE_COLUMN)
DECIMAL_SHIFTS = (10, 100, 1000)


def _measured(scope: Scope, rng: np.random.Generator, codes_of, keep=None) -> tuple[str, pd.Series] | None:
    """A row with a value, of a code `codes_of(table)` lists, passing `keep(frame, table) -> mask`; tables tried
    in a seeded order."""
    for table in scope.tables_among(rng, MEASUREMENTS):
        frame = scope.available(table)
        frame = frame[frame["value"].notna() & frame[CODE_COLUMN[table]].isin([str(c) for c in codes_of(table)])]
        if keep is not None and not frame.empty:
            frame = frame[keep(frame, table)]
        row = pick(rng, frame)
        if row is not None:
            return table, row
    return None


def _bands(scope: Scope, table: str) -> dict[str, tuple[float, float]]:
    return {str(code): (band.low, band.high) for code, band in scope.facts.plausible.get(table, {}).items()}


def _outside(values: pd.Series, codes: pd.Series, bands: dict[str, tuple[float, float]]) -> pd.Series:
    low = codes.map({code: band[0] for code, band in bands.items()})
    high = codes.map({code: band[1] for code, band in bands.items()})
    return (values < low) | (values > high)


def _changed_value(scope: Scope, table: str, row: pd.Series, value: float) -> Change:
    written = number(value, scope.corruption.precision(table, row[CODE_COLUMN[table]]))
    return Change(table, row.name, "corrupted", "value", row["value"], written)


def range_extreme(scope: Scope, rng: np.random.Generator) -> list[Change] | None:
    """The value replaced by one 1.5-3x above the highest plausible value of its code."""
    found = _measured(scope, rng, lambda table: _bands(scope, table))
    if found is None:
        return None
    table, row = found
    high = _bands(scope, table)[row[CODE_COLUMN[table]]][1]
    return [_changed_value(scope, table, row, high * rng.uniform(1.5, 3.0))]


def decimal_shift(scope: Scope, rng: np.random.Generator) -> list[Change] | None:
    """The value multiplied by 10, 100 or 1000 (a misplaced decimal point), to beyond its plausible band."""
    def shiftable(frame: pd.DataFrame, table: str) -> pd.Series:
        high = frame[CODE_COLUMN[table]].map({code: band[1] for code, band in _bands(scope, table).items()})
        return pd.to_numeric(frame["value"]) * max(DECIMAL_SHIFTS) > high

    found = _measured(scope, rng, lambda table: _bands(scope, table), shiftable)
    if found is None:
        return None
    table, row = found
    high = _bands(scope, table)[row[CODE_COLUMN[table]]][1]
    factors = [f for f in DECIMAL_SHIFTS if float(row["value"]) * f > high]
    return [_changed_value(scope, table, row, float(row["value"]) * factors[int(rng.integers(len(factors)))])]


def _conversions(scope: Scope, table: str) -> dict[str, tuple[float, str]]:
    return {str(c.code): (c.factor, c.to_unit) for c in scope.facts.unit_conversions if c.table == table}


def unit_confusion(scope: Scope, rng: np.random.Generator) -> list[Change] | None:
    """The value converted into another unit (creatinine x88.42, glucose x0.0555, ...) under its old unit label,
    where the value as written leaves the plausible band of the label's unit."""
    def implausible(frame: pd.DataFrame, table: str) -> pd.Series:
        codes = frame[CODE_COLUMN[table]]
        factors = codes.map({code: c[0] for code, c in _conversions(scope, table).items()})
        scale = codes.map({code: 10.0 ** scope.corruption.precision(table, code) for code in codes.unique()})
        value = pd.to_numeric(frame["value"])
        written = (value * factors * scale).round() / scale  # as _changed_value will write it
        return _outside(written, codes, _bands(scope, table)) & (written != value)

    found = _measured(scope, rng, lambda table: _conversions(scope, table), implausible)
    if found is None:
        return None
    table, row = found
    factor, _ = _conversions(scope, table)[row[CODE_COLUMN[table]]]
    return [_changed_value(scope, table, row, float(row["value"]) * factor)]


def unit_label_mismatch(scope: Scope, rng: np.random.Generator) -> list[Change] | None:
    """The unit label changed to another unit of the quantity (mg/dL -> mmol/L, ...), the value left as it was."""
    def relabelable(frame: pd.DataFrame, table: str) -> pd.Series:
        target = frame[CODE_COLUMN[table]].map({code: c[1] for code, c in _conversions(scope, table).items()})
        return frame["unit"].notna() & (frame["unit"] != target)

    found = _measured(scope, rng, lambda table: _conversions(scope, table), relabelable)
    if found is None:
        return None
    table, row = found
    _, unit = _conversions(scope, table)[row[CODE_COLUMN[table]]]
    return [Change(table, row.name, "corrupted", "unit", row["unit"], unit)]


INJECTORS = {
    "range_extreme": Injector(MEASUREMENTS, range_extreme),
    "decimal_shift": Injector(MEASUREMENTS, decimal_shift),
    "unit_confusion": Injector(MEASUREMENTS, unit_confusion),
    "unit_label_mismatch": Injector(MEASUREMENTS, unit_label_mismatch),
}
