"""The published eICU preprocessing (glee4810/EHRSQL `preprocess/preprocess_db_eicu.py` and `preprocess_utils.py`:
Build_eICU, Sampler, adjust_time, condition_value_shuffler), re-derived in plain Python from the raw CSV files, for
tests to hold both eICU databases to: EHRSQL (2022)'s (`ehrsql_eicu`) and EHR-ChatQA's (`renamed/eicu`). Independent
of the dbt models and of ehrbench's own samplers: every numpy call is written out here as the published code makes
it."""

from __future__ import annotations

import csv
import gzip
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np


def read_raw(demo_dir: Path, name: str) -> list[dict[str, str | None]]:
    """A raw eICU file as the published read_csv leaves it: text lower-cased and stripped, empty cells None."""
    with gzip.open(demo_dir / name, "rt", newline="") as handle:
        return [{key: (value.strip().lower() or None) for key, value in row.items()} for row in csv.DictReader(handle)]


def published_time_shift(patients: list[dict], *, seed: int, start_year: int, time_span: int,
                         age_over_89: int | None, hospital_stay_percentile: float | None):
    """Build_eICU.build_admission_table up to the cohort sample: the filters (admit source, gender, age with "> 89"
    dropped (None, EHRSQL (2022)) or read as 90 (EHR-ChatQA), age > 10, then the hospital stay below its percentile
    when one is given), then the per-patient loop with Sampler.first_admit_year_sampler and
    Sampler.sample_date_given_year on one default_rng(seed). Returns the generator after the loop and
    {patientunitstayid: row + unit admit time, age, offsets and file position}, in the raw file's order."""
    kept = []
    for position, row in enumerate(patients):
        if row["hospitaladmitsource"] is None or row["gender"] not in ("male", "female") or row["age"] is None:
            continue
        if row["age"] == "> 89":
            if age_over_89 is None:
                continue
            age = age_over_89
        else:
            age = int(row["age"])
        if age > 10:
            kept.append(row | {"age": age, "position": position})
    if hospital_stay_percentile is not None:
        lengths = [int(row["hospitaldischargeoffset"]) - int(row["hospitaladmitoffset"]) for row in kept]
        threshold = np.percentile(lengths, q=hospital_stay_percentile)
        kept = [row for row, length in zip(kept, lengths, strict=True) if length < threshold]
    rng = np.random.default_rng(seed)
    prob = np.arange(1, time_span + 2) / np.arange(1, time_span + 2).sum()
    stays: dict[int, dict] = {}
    for patient in dict.fromkeys(row["uniquepid"] for row in kept):  # first appearance in patient.csv
        rows = [row for row in kept if row["uniquepid"] == patient]
        years = sorted({int(row["hospitaldischargeyear"]) for row in rows})
        first_age = min(row["age"] for row in rows)
        sampled_year = int(rng.choice(range(start_year, start_year + time_span + 1), p=prob))
        stopped = False
        for year in years:
            in_year = [row for row in rows if int(row["hospitaldischargeyear"]) == year]
            visits = list(dict.fromkeys(row["patienthealthsystemstayid"] for row in in_year))
            shifted = sampled_year + (year - years[0])
            start, end = datetime(shifted, 1, 1), datetime(shifted, 12, 31)
            dates = [start + timedelta(seconds=int((k / len(visits) + rng.random() / len(visits))
                                                   * (end - start).total_seconds())) for k in range(len(visits))]
            for visit, day in zip(visits, dates, strict=True):
                for row in (r for r in in_year if r["patienthealthsystemstayid"] == visit):
                    offsets = [int(row[c]) for c in ("hospitaladmitoffset", "unitdischargeoffset",
                                                      "hospitaldischargeoffset")]
                    if not offsets[0] <= 0 < offsets[1] <= offsets[2]:
                        stopped = True
                        break
                    clock = datetime.strptime(row["hospitaladmittime24"], "%H:%M:%S").time()
                    admit = datetime.combine(day.date(), clock)
                    stays[int(row["patientunitstayid"])] = row | {
                        "unitadmittime": admit - timedelta(minutes=offsets[0]),
                        "age": first_age + (year - years[0]), "offsets": offsets}
                if stopped:
                    break
            if stopped:
                break
    return rng, dict(sorted(stays.items(), key=lambda item: item[1]["position"]))


def admitted_by(stays: dict[int, dict], now: datetime) -> dict[int, dict]:
    """The stays whose hospital and unit admissions lie up to `now` (the others are dropped), with
    `hospitaldischargetime` (None after now)."""
    kept = {}
    for unit, row in stays.items():
        if row["unitadmittime"] + timedelta(minutes=row["offsets"][0]) <= now and row["unitadmittime"] <= now:
            discharge = row["unitadmittime"] + timedelta(minutes=row["offsets"][2])
            kept[unit] = row | {"hospitaldischargetime": discharge if discharge <= now else None}
    return kept


def published_cohort(rng: np.random.Generator, stays: dict[int, dict], *, num_patient: int,
                     cur_patient_ratio: float) -> dict[int, dict]:
    """The patient sample: rng.choice(current pool, int(num_patient * ratio), replace=False), then
    rng.choice(the other discharged patients, the rest, replace=False), pools unique in patient.csv order. numpy
    raises before drawing when a pool is smaller than asked; such a pool is taken whole here."""
    def choose(pool: list[str], size: int) -> list[str]:
        if size > len(pool):
            return pool
        return rng.choice(np.array(pool, dtype=object), size, replace=False).tolist()

    num_current = int(num_patient * cur_patient_ratio)
    current_pool = list(dict.fromkeys(row["uniquepid"] for row in stays.values()
                                      if row["hospitaldischargetime"] is None))
    current = choose(current_pool, num_current)
    others_pool = list(dict.fromkeys(row["uniquepid"] for row in stays.values()
                                     if row["hospitaldischargetime"] is not None and row["uniquepid"] not in current))
    others = choose(others_pool, num_patient - num_current)
    chosen = set(current) | set(others)
    return {unit: row for unit, row in stays.items() if row["uniquepid"] in chosen}


def event_time(stays: dict, unit: str | None, offset: str | None, now: datetime) -> datetime | None:
    """adjust_time: the stay's unit admit time + the offset in minutes; None for a stay not kept or after now."""
    if unit is None or offset is None or int(unit) not in stays:
        return None
    moment = stays[int(unit)]["unitadmittime"] + timedelta(minutes=int(float(offset)))
    return moment if moment <= now else None


def published_paths(rows: list[dict], column: str, id_column: str) -> tuple[set[str], Counter]:
    """The published diagnosis/treatment path rule: per levels 3-4, the most common levels 1-2
    (collections.Counter.most_common over the file's rows, which keeps the first seen of a tie); returns the kept
    'levels 1-2|3-4' paths and, for the ties, whether the file order decides them differently from the lowest id."""
    upper_by_lower: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for row in rows:
        parts = row[column].split("|")
        upper_by_lower["|".join(parts[2:4])].append(("|".join(parts[:2]), int(row[id_column])))
    kept, decided_by_file_order = set(), Counter()
    for lower, uppers in upper_by_lower.items():
        counts = Counter(upper for upper, _ in uppers)
        winner = counts.most_common(1)[0][0]
        kept.add(f"{winner}|{lower}")
        top = [upper for upper in counts if counts[upper] == counts[winner]]
        if len(top) > 1:
            decided_by_file_order[winner != min(top, key=lambda u: min(i for v, i in uppers if v == u))] += 1
    return kept, decided_by_file_order


def deidentified(rows: list[dict], columns: list[str], stays_in_patient_csv: set[int]) -> list[dict]:
    """condition_value_shuffler on the table merged with patient.csv: the merge (pandas before 2.2, as in 2022)
    groups the rows by unit stay in order of first appearance, file order within a stay; row i then takes `columns`
    from row order[i], order = default_rng(0).choice(arange(n), n, replace=False)."""
    merged = [row for row in rows if int(row["patientunitstayid"]) in stays_in_patient_csv]
    first_seen: dict[str, int] = {}
    for index, row in enumerate(merged):
        first_seen.setdefault(row["patientunitstayid"], index)
    merged = [row for _, row in sorted(enumerate(merged),
                                       key=lambda item: (first_seen[item[1]["patientunitstayid"]], item[0]))]
    order = np.random.default_rng(0).choice(np.arange(len(merged)), len(merged), replace=False)
    return [row | {column: merged[source][column] for column in columns} for row, source in zip(merged, order,
                                                                                                strict=True)]
