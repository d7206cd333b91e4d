"""Seeded draws of EHR-ChatQA's eICU time shift (docs/benchmarks.md#ehr-chatqa-eicu-database, draws 1 and 2): one
sampled hospital admission date per hospital stay, and the generator's state afterwards.

One numpy default_rng(seed) serves every draw of the database, in this order:
1. per patient, in order of first appearance in patient.csv (patient_order), one
   rng.choice(range(start_year, start_year + time_span + 1), p ∝ 1, 2, …, time_span + 1): the patient's first
   year (a draw is consumed even when time_span is 0);
2. per discharge year the loop reached, in ascending order, the year first year + (discharge year − first
   discharge year) is split into n equal strata for the patient's n hospital stays discharged that year (first
   appearance order, visit_seq): one rng.random() per stay, which places stay k on day
   floor((k + random) / n × D) after January 1, D = days from January 1 to December 31 (the published sampler
   works in seconds of local time, in a time zone without daylight saving time).
No cohort is sampled: the published sampler raises before drawing when asked for more patients than there are,
so the cost draws (int_renamed__eicu__cost_amounts) continue from the state after (2), kept in `rng_state`.
Only the small list of (patient, discharge year, number of stays) goes through Python.
"""

import json
from datetime import date, timedelta

import numpy as np
import pyarrow as pa

SECONDS_PER_DAY = 86400


def draw_admit_dates(rows, *, seed, start_year, time_span):
    """rows: (uniquepid, patient_order, hospitaldischargeyear, first_dischargeyear, visits_in_year, year_reached).
    Returns ([(uniquepid, hospitaldischargeyear, visit_seq, sampled_first_year, hospitaladmitdate)], rng)."""
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
            january_first = date(shifted_year, 1, 1)
            span_seconds = (date(shifted_year, 12, 31) - january_first).days * SECONDS_PER_DAY
            for visit_seq in range(visits):
                split_seed = visit_seq / visits + rng.random() / visits
                elapsed = int(split_seed * span_seconds)  # local time in whole seconds
                day = elapsed // SECONDS_PER_DAY
                out.append((uniquepid, year, visit_seq, sampled_first_year, january_first + timedelta(days=day)))
    return out, rng


def model(dbt, session):
    dbt.config(materialized="table")
    seed = int(dbt.config.get("ehrsql_eicu_seed"))
    start_year = int(dbt.config.get("ehrsql_eicu_start_year"))
    time_span = int(dbt.config.get("ehrsql_eicu_time_span"))

    stays = dbt.ref("int_renamed__eicu__unit_stays")
    keys = "uniquepid, patient_order, hospitaldischargeyear, first_dischargeyear"
    rows = stays.aggregate(
        f"{keys}, max(visits_in_year) as visits_in_year, bool_and(year_reached) as year_reached", keys
    ).order("patient_order, hospitaldischargeyear").fetchall()

    drawn, rng = draw_admit_dates(rows, seed=seed, start_year=start_year, time_span=time_span)
    state = json.dumps(rng.bit_generator.state)
    columns = list(zip(*drawn, strict=True)) if drawn else [[], [], [], [], []]
    return pa.table(
        {
            "uniquepid": pa.array(columns[0], pa.string()),
            "hospitaldischargeyear": pa.array(columns[1], pa.int32()),
            "visit_seq": pa.array(columns[2], pa.int64()),
            "sampled_first_year": pa.array(columns[3], pa.int32()),
            "hospitaladmitdate": pa.array(columns[4], pa.date32()),
            "rng_state": pa.array([state] * len(drawn), pa.string()),
        }
    )
