"""A rule-based reference auditor of data-quality audit tasks (docs/benchmarks.md#data-quality-error-injection).

It flags the rows of an audit folder (`data/<table>.csv.gz`) that simple, explainable rules find suspicious, so
that each task can be calibrated against a baseline: what a rule-based auditor catches (recall) and how much it
flags that is not an injected error (precision). It catches the impossible-value, inconsistency, temporal and
orphan-reference families; demographic contradictions need clinical reasoning and are left to the agents.

Checks (names as in `CHECKS`):
- range: a numeric value outside the physiologically plausible band of its lab test or chart item.
- unit: a unit other than the predominant unit of its code, when that unit covers >= 95 % of the code's rows.
- duplicate: two rows of one patient and code within 5 minutes of each other whose values differ by more than 5 %
  (routine charting repeats a vital sign every few minutes with small changes).
- cross_table: a lab result and the chart observation of its mapped item within 5 minutes, differing by > 10 %.
- temporal: discharge before admission, medication stop before start, death date before an admission.
- reference: an admission id that exists nowhere or belongs to another patient; a code absent from its dictionary.

Every CSV cell is read as text ("" is null); codes and ids are compared as text, numbers and times parsed leniently
(an unparsable cell never matches a rule, it is not an error of the auditor).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from ehrbench.dq.extract import CODE_COLUMN, TABLE_ORDER
from ehrbench.dq.facts import load_facts

CHECKS = ("range", "unit", "duplicate", "cross_table", "temporal", "reference")
WINDOW = pd.Timedelta(minutes=5)  # duplicates and lab/chart copies are moved by at most 5 minutes
UNIT_SHARE = 0.95  # below this share a code's units are genuinely mixed, not mislabelled
CROSS_TOLERANCE = 0.10  # a lab value and its bedside copy agree within 10 %
DUPLICATE_TOLERANCE = 0.05  # repeated measurements a few minutes apart drift this much
_MEASUREMENTS = CODE_COLUMN
_TIMES = {"lab_results": "charted_at", "chart_observations": "charted_at"}
_DICTIONARIES = {"lab_results": ("lab_tests", "test_code"), "chart_observations": ("chart_items", "item_code")}
_ADMISSION_REFERRERS = ("lab_results", "chart_observations", "medication_orders", "diagnoses", "icu_stays")
_TABLES = tuple(TABLE_ORDER)
_KEY_COLUMNS = ("patient_id", "admission_id", "stay_id", "test_code", "item_code")


@dataclass(frozen=True, order=True)
class Finding:
    table: str
    row_id: str
    check: str
    reason: str


def audit(data_dir: Path, checks: Sequence[str] = CHECKS) -> list[Finding]:
    """The findings of the chosen checks on an audit folder, sorted by table, row id, check (then reason).

    A table whose file is absent is skipped, with every check (or part of one) that needs it."""
    unknown = sorted(set(checks) - set(CHECKS))
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(unknown)}; expected some of {', '.join(CHECKS)}")
    data, facts = _Parsed(_read_tables(Path(data_dir))), _facts()
    runners = {"range": lambda: _range(data, facts), "unit": lambda: _unit(data.tables),
               "duplicate": lambda: _duplicate(data), "cross_table": lambda: _cross_table(data, facts),
               "temporal": lambda: _temporal(data), "reference": lambda: _reference(data.tables)}
    findings: set[Finding] = set()
    for check in CHECKS:
        if check in checks:
            findings.update(runners[check]())
    return sorted(findings)


def flagged_rows(findings: Iterable[Finding]) -> list[tuple[str, str]]:
    """The distinct (table, row id) pairs of the findings, sorted: what a submission names."""
    return sorted({(f.table, f.row_id) for f in findings})


def write_flagged_rows(findings: Iterable[Finding], path: Path) -> None:
    """Write the submission file (`table,_row_id`, header included) that `ehrbench.dq.score` reads."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["table", "_row_id"])
        writer.writerows(flagged_rows(findings))


# ---- reading ----------------------------------------------------------------------------------------------------

@cache
def _facts() -> dict:
    """The clinical facts with codes as text, as they appear in the CSV cells."""
    facts = load_facts()
    plausible = {table: {str(code): band.model_dump() for code, band in bands.items()}
                 for table, bands in facts.plausible.items()}
    return {"plausible": plausible, "lab_to_chart": {str(lab): str(chart) for lab, chart in facts.lab_to_chart.items()}}


def _read_tables(data_dir: Path) -> dict[str, pd.DataFrame]:
    """The audit tables present in the folder, all cells text with "" as NaN and ids normalised."""
    tables = {}
    for name in _TABLES:
        path = next((p for p in (data_dir / f"{name}.csv.gz", data_dir / f"{name}.csv") if p.is_file()), None)
        if path is None:
            continue
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, engine="pyarrow").reset_index(drop=True)
        for column in _KEY_COLUMNS:
            if column in frame:  # an id written from a nullable float column ("12.0") is still id 12
                floaty = frame[column].str.endswith(".0")
                if floaty.any():
                    frame[column] = frame[column].where(~floaty, frame[column].str[:-2])
        tables[name] = frame.where(frame != "")
    return tables


def _time(series: pd.Series) -> pd.Series:
    return pd.to_datetime(series, format="ISO8601", errors="coerce")


def _number(series: pd.Series) -> pd.Series:
    return pd.to_numeric(series, errors="coerce")


class _Parsed:
    """Numbers and times of the table columns, parsed once per audit (several checks read the same columns)."""

    def __init__(self, tables: dict[str, pd.DataFrame]):
        self.tables, self._cache = tables, {}

    def number(self, table: str, column: str) -> pd.Series:
        return self._get(table, column, _number)

    def time(self, table: str, column: str) -> pd.Series:
        return self._get(table, column, _time)

    def _get(self, table, column, parse) -> pd.Series:
        key = (table, column, parse)
        if key not in self._cache:
            self._cache[key] = parse(self.tables[table][column])
        return self._cache[key]


def _findings(table: str, frame: pd.DataFrame, check: str, reasons: Iterable[str]) -> list[Finding]:
    return [Finding(table, str(row_id), check, reason) for row_id, reason in zip(frame["_row_id"], reasons, strict=True)
            if isinstance(row_id, str)]


def _has(tables: dict[str, pd.DataFrame], table: str, *columns: str) -> bool:
    return table in tables and all(c in tables[table] for c in ("_row_id", *columns))


# ---- checks -----------------------------------------------------------------------------------------------------

def _range(data: _Parsed, facts: dict) -> list[Finding]:
    """Values no measurement in the recorded unit can take: range extremes, decimal shifts, unit confusions."""
    out = []
    for table, code in _MEASUREMENTS.items():
        bands = facts["plausible"].get(table, {})
        if not _has(data.tables, table, code, "value") or not bands:
            continue
        frame = data.tables[table]
        value = data.number(table, "value")
        low = frame[code].map({c: float(b["low"]) for c, b in bands.items()}).astype("float64")
        high = frame[code].map({c: float(b["high"]) for c, b in bands.items()}).astype("float64")
        bad = frame[(value < low) | (value > high)]
        out += _findings(table, bad, "range", (
            f"{code} {c}: value {v} outside the plausible band [{lo:g}, {hi:g}]"
            for c, v, lo, hi in zip(bad[code], bad["value"], low[bad.index], high[bad.index], strict=True)))
    return out


def _unit(tables: dict[str, pd.DataFrame]) -> list[Finding]:
    """Unit labels that disagree with an otherwise uniform unit of the code (a null unit is missing, not another)."""
    out = []
    for table, code in _MEASUREMENTS.items():
        if not _has(tables, table, code, "unit"):
            continue
        frame = tables[table].dropna(subset=[code])
        counts = frame.groupby(code)["unit"].value_counts()  # non-null units only
        if counts.empty:
            continue
        top = counts.groupby(level=0).idxmax().map(lambda pair: pair[1])
        share = counts.groupby(level=0).max() / frame.groupby(code).size().reindex(top.index)
        uniform = top[share >= UNIT_SHARE]
        expected = frame[code].map(uniform)
        bad = frame[expected.notna() & frame["unit"].notna() & (frame["unit"] != expected)]
        out += _findings(table, bad, "unit", (
            f"{code} {c}: unit {u!r} where {share[c]:.1%} of the code's rows use {uniform[c]!r}"
            for c, u in zip(bad[code], bad["unit"], strict=True)))
    return out


def _close_pairs(frame: pd.DataFrame, keys: list[str], time: str) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (earlier, later) of rows with equal keys whose times are at most WINDOW apart.

    Sorting by keys and time makes the rows near a row its neighbours: compare each row with the k-th next one
    for k = 1, 2, ... until no pair at distance k is close (none further can be), linear in the close pairs."""
    frame = frame.dropna(subset=[*keys, time]).sort_values([*keys, time], kind="stable")
    index, times = frame.index.to_numpy(), frame[time].to_numpy()
    group = frame.groupby(keys, sort=False).ngroup().to_numpy()
    firsts, seconds = [np.empty(0, dtype=index.dtype)], [np.empty(0, dtype=index.dtype)]
    for k in range(1, len(frame)):
        close = np.flatnonzero((group[k:] == group[:-k]) & (times[k:] - times[:-k] <= WINDOW.to_timedelta64()))
        if not len(close):
            break
        firsts.append(index[close])
        seconds.append(index[close + k])
    return np.concatenate(firsts), np.concatenate(seconds)


def _duplicate(data: _Parsed) -> list[Finding]:
    """Near-simultaneous repeats of one measurement with a different value: an altered copy and its original."""
    out = []
    for table, code in _MEASUREMENTS.items():
        time = _TIMES[table]
        if not _has(data.tables, table, "patient_id", code, time, "value"):
            continue
        frame = data.tables[table]
        work = pd.DataFrame({"patient_id": frame["patient_id"], "code": frame[code], "time": data.time(table, time)})
        first, second = _close_pairs(work, ["patient_id", "code"], "time")
        text, value = frame["value"], data.number(table, "value")
        a, b = value.to_numpy()[first], value.to_numpy()[second]
        numeric = ~np.isnan(a) & ~np.isnan(b)
        same_text = text.fillna("").to_numpy()[first] == text.fillna("").to_numpy()[second]
        with np.errstate(invalid="ignore"):
            apart = np.abs(a - b) > DUPLICATE_TOLERANCE * np.minimum(np.abs(a), np.abs(b))
        differ = np.where(numeric, apart, ~same_text)
        for one, other in ((first[differ], second[differ]), (second[differ], first[differ])):
            rows = frame.loc[one]
            out += _findings(table, rows, "duplicate", (
                f"{code} {c}: value {v} vs {w} in row {r} of the same patient within 5 minutes"
                for c, v, w, r in zip(rows[code], rows["value"], frame.loc[other, "value"],
                                      frame.loc[other, "_row_id"], strict=True)))
    return out


def _cross_table(data: _Parsed, facts: dict) -> list[Finding]:
    """A lab result and the bedside chart entry of the same test at the same time that disagree: a bad copy."""
    tables = data.tables
    if not (_has(tables, "lab_results", "patient_id", "test_code", "charted_at", "value")
            and _has(tables, "chart_observations", "patient_id", "item_code", "charted_at", "value")):
        return []
    lab, chart = tables["lab_results"], tables["chart_observations"]
    mapping = facts["lab_to_chart"]
    lab_in = lab["test_code"].isin(mapping.keys()).to_numpy()
    chart_in = chart["item_code"].isin(mapping.values()).to_numpy()
    lab, chart = lab[lab_in], chart[chart_in]
    work = pd.concat([
        pd.DataFrame({"source": "lab", "patient_id": lab["patient_id"], "item": lab["test_code"].map(mapping),
                      "time": data.time("lab_results", "charted_at")[lab_in],
                      "value": data.number("lab_results", "value")[lab_in], "row": lab.index}),
        pd.DataFrame({"source": "chart", "patient_id": chart["patient_id"], "item": chart["item_code"],
                      "time": data.time("chart_observations", "charted_at")[chart_in],
                      "value": data.number("chart_observations", "value")[chart_in], "row": chart.index}),
    ], ignore_index=True)
    first, second = _close_pairs(work, ["patient_id", "item"], "time")
    source = work["source"].to_numpy()
    mixed = source[first] != source[second]
    first, second = first[mixed], second[mixed]
    is_lab = source[first] == "lab"
    lab_at, chart_at = np.where(is_lab, first, second), np.where(is_lab, second, first)
    lab_value, chart_value = work["value"].to_numpy()[lab_at], work["value"].to_numpy()[chart_at]
    with np.errstate(divide="ignore", invalid="ignore"):
        off = np.abs(chart_value - lab_value) / np.abs(lab_value)
    off = np.where(lab_value == 0, np.where(chart_value == 0, 0.0, np.inf), off)
    keep = off > CROSS_TOLERANCE  # NaN (a value that is not a number) compares False
    lab_rows = tables["lab_results"].loc[work["row"].to_numpy()[lab_at[keep]]]
    chart_rows = tables["chart_observations"].loc[work["row"].to_numpy()[chart_at[keep]]]
    reasons = [f"lab {lv:g} (test {t}, row {lr}) vs chart {cv:g} (item {i}, row {cr}): {o:.0%} apart within 5 minutes"
               for lv, t, lr, cv, i, cr, o in zip(lab_value[keep], lab_rows["test_code"], lab_rows["_row_id"],
                                                   chart_value[keep], chart_rows["item_code"], chart_rows["_row_id"],
                                                   off[keep], strict=True)]
    return (_findings("lab_results", lab_rows, "cross_table", reasons)
            + _findings("chart_observations", chart_rows, "cross_table", reasons))


def _temporal(data: _Parsed) -> list[Finding]:
    """Events in an impossible order: leaving before arriving, stopping before starting, dying before admission."""
    tables, out = data.tables, []
    if _has(tables, "admissions", "admit_time", "discharge_time"):
        adm = tables["admissions"]
        bad = adm[data.time("admissions", "discharge_time") < data.time("admissions", "admit_time")]
        out += _findings("admissions", bad, "temporal", (
            f"discharge {d} before admission {a}" for a, d in zip(bad["admit_time"], bad["discharge_time"],
                                                                  strict=True)))
    if _has(tables, "medication_orders", "start_time", "stop_time"):
        med = tables["medication_orders"]
        bad = med[data.time("medication_orders", "stop_time") < data.time("medication_orders", "start_time")]
        out += _findings("medication_orders", bad, "temporal", (
            f"stop {e} before start {s}" for s, e in zip(bad["start_time"], bad["stop_time"], strict=True)))
    if _has(tables, "admissions", "patient_id", "admit_time") and _has(tables, "patients", "patient_id",
                                                                          "death_date"):
        adm, pat = tables["admissions"], tables["patients"]
        both = adm[["_row_id", "patient_id", "admission_id", "admit_time"]].merge(
            pat.dropna(subset=["patient_id", "death_date"])[["_row_id", "patient_id", "death_date"]],
            on="patient_id", suffixes=("", "_patient"))
        bad = both[_time(both["death_date"]) < _time(both["admit_time"]).dt.normalize()]
        reasons = [f"patient {p} died {d}, before admission {a} at {t}" for p, d, a, t in
                   zip(bad["patient_id"], bad["death_date"], bad["admission_id"], bad["admit_time"], strict=True)]
        out += _findings("admissions", bad, "temporal", reasons)
        out += _findings("patients", bad.assign(_row_id=bad["_row_id_patient"]), "temporal", reasons)
    return out


def _reference(tables: dict[str, pd.DataFrame]) -> list[Finding]:
    """References to nothing (an unknown admission or code) or to someone else (another patient's admission)."""
    out = []
    if _has(tables, "admissions", "admission_id"):
        adm = tables["admissions"].dropna(subset=["admission_id"])
        owner = adm.drop_duplicates("admission_id").set_index("admission_id")["patient_id"] \
            if "patient_id" in adm else pd.Series(dtype=object)
        known = set(adm["admission_id"])
        for table in _ADMISSION_REFERRERS:
            if not _has(tables, table, "admission_id"):
                continue
            frame = tables[table]
            given = frame["admission_id"]
            unknown = frame[given.notna() & ~given.isin(known)]
            out += _findings(table, unknown, "reference", (
                f"admission {a} is in no admission" for a in unknown["admission_id"]))
            if "patient_id" in frame and len(owner):
                expected = given.map(owner)
                other = frame[expected.notna() & frame["patient_id"].notna() & (expected != frame["patient_id"])]
                out += _findings(table, other, "reference", (
                    f"admission {a} belongs to patient {owner[a]}, not {p}"
                    for a, p in zip(other["admission_id"], other["patient_id"], strict=True)))
    for table, (dictionary, code) in _DICTIONARIES.items():
        if not (_has(tables, table, code) and dictionary in tables and code in tables[dictionary]):
            continue
        frame = tables[table]
        known = set(tables[dictionary][code].dropna())
        bad = frame[frame[code].notna() & ~frame[code].isin(known)]
        out += _findings(table, bad, "reference", (f"{code} {c} is not in {dictionary}" for c in bad[code]))
    return out
