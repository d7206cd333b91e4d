"""Seeded draws of the EHRSQL eICU time shift: one sampled hospital admission date per hospital stay.

Follows the published sampler (EHRSQL preprocess_utils.Sampler) with numpy's default_rng(seed):
- per patient, in order of first appearance (lowest patientunitstayid), one
  rng.choice(range(start_year, start_year + time_span + 1), p ∝ 1, 2, …, time_span + 1): the
  patient's first year (a draw is consumed even when time_span is 0);
- then per discharge year the loop reached, in ascending order, the year
  first year + (discharge year − first discharge year) is split into n equal strata for the
  patient's n hospital stays discharged that year; stay k (0-based, by first appearance) gets
  day floor((k + rng.random()) / n × D) after January 1, where D = days from Jan 1 to Dec 31.
Only the small list of (patient, discharge year, number of stays) goes through Python.
"""

from datetime import date, timedelta

import numpy as np
import pyarrow as pa


def draw_admit_dates(rows, *, seed, start_year, time_span):
    """rows: (uniquepid, patient_order, hospitaldischargeyear, first_dischargeyear, visits_in_year,
    year_reached). Returns a list of (uniquepid, hospitaldischargeyear, visit_seq, sampled_first_year,
    hospitaladmitdate)."""
    rng = np.random.default_rng(seed)
    weights = np.arange(1, time_span + 2)
    prob = weights / weights.sum()
    years = range(start_year, start_year + time_span + 1)

    by_patient = {}
    for uniquepid, order, year, first_year, visits, reached in rows:
        by_patient.setdefault((order, uniquepid), []).append((year, first_year, visits, reached))

    out = []
    for (_, uniquepid), patient_years in sorted(by_patient.items()):
        sampled_first_year = int(rng.choice(years, p=prob))
        for year, first_year, visits, reached in sorted(patient_years):
            if not reached:
                continue
            shifted_year = sampled_first_year + (year - first_year)
            jan1 = date(shifted_year, 1, 1)
            span_days = (date(shifted_year, 12, 31) - jan1).days
            for visit_seq in range(visits):
                split_seed = visit_seq / visits + rng.random() / visits
                day = int(np.floor(split_seed * span_days))
                out.append((uniquepid, year, visit_seq, sampled_first_year, jan1 + timedelta(days=day)))
    return out


def model(dbt, session):
    dbt.config(materialized="table")
    seed = int(dbt.config.get("ehrsql_eicu_seed"))
    start_year = int(dbt.config.get("ehrsql_eicu_start_year"))
    time_span = int(dbt.config.get("ehrsql_eicu_time_span"))

    stays = dbt.ref("int_ehrsql_eicu__eicu__unit_stays")
    keys = "uniquepid, patient_order, hospitaldischargeyear, first_dischargeyear"
    rows = stays.aggregate(
        f"{keys}, max(visits_in_year) as visits_in_year, bool_and(year_reached) as year_reached", keys
    ).order("patient_order, hospitaldischargeyear").fetchall()

    drawn = draw_admit_dates(rows, seed=seed, start_year=start_year, time_span=time_span)
    columns = list(zip(*drawn, strict=True)) if drawn else [[], [], [], [], []]
    return pa.table(
        {
            "uniquepid": pa.array(columns[0], pa.string()),
            "hospitaldischargeyear": pa.array(columns[1], pa.int32()),
            "visit_seq": pa.array(columns[2], pa.int64()),
            "sampled_first_year": pa.array(columns[3], pa.int32()),
            "hospitaladmitdate": pa.array(columns[4], pa.date32()),
        }
    )
