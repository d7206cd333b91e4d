"""The seeded draws of the published eICU preprocessing (glee4810/EHRSQL `preprocess/preprocess_db_eicu.py` and
`preprocess_utils.Sampler`), shared by both eICU databases: EHRSQL (2022)'s (profile `ehrsql_eicu`,
docs/benchmarks.md#ehrsql-eicu-database) and EHR-ChatQA's (`renamed/eicu`, docs/benchmarks.md#ehr-chatqa-eicu-database).

One `numpy.random.default_rng(seed)` serves, in this order: the time shift (`draw_admit_dates`), the cohort sample
(`ehrbench.ehrsql.sampling.sample_cohort`, EHRSQL (2022) only) and the costs (`draw_event_costs`); the dbt models
hand the generator from one step to the next with `rng_state` / `restore_rng`. The de-identifying shuffle
(`deidentify_order`) draws from a fresh `default_rng(0)` per table, as the published `condition_value_shuffler` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import date, timedelta

import numpy as np

from ehrbench.ehrsql.sampling import draw_first_years

SECONDS_PER_DAY = 86400


def draw_admit_dates(rng: np.random.Generator, rows: Iterable[tuple], *, start_year: int,
                     time_span: int) -> list[tuple]:
    """The time shift, for patients in loop order.

    rows: (uniquepid, patient_order, hospitaldischargeyear, first_dischargeyear, visits_in_year, year_reached), one
    per patient and discharge year. Per patient (ascending patient_order) one
    `rng.choice(range(start_year, start_year + time_span + 1), p ∝ 1, 2, …, time_span + 1)`, the patient's first
    year (drawn even when time_span is 0); then per discharge year the loop reached, in ascending order, the year
    first year + (discharge year − first discharge year) is split into n equal strata for the patient's n hospital
    stays discharged that year: one `rng.random()` per stay places stay k on day floor((k + random) / n × D) after
    January 1, D = days from January 1 to December 31 (the published sampler works in whole seconds of local time,
    in a time zone without daylight saving time).

    Returns (uniquepid, hospitaldischargeyear, visit_seq, sampled_first_year, hospitaladmitdate) per stay.
    """
    by_patient: dict[tuple, list[tuple]] = {}
    for uniquepid, order, year, first_year, visits, reached in rows:
        by_patient.setdefault((order, uniquepid), []).append((year, first_year, visits, reached))

    drawn = []
    for (_, uniquepid), patient_years in sorted(by_patient.items()):
        sampled_first_year = draw_first_years(rng, 1, start_year, time_span)[0]
        for year, first_year, visits, reached in sorted(patient_years):
            if not reached:
                continue
            shifted_year = sampled_first_year + (year - first_year)
            january_first = date(shifted_year, 1, 1)
            span_seconds = (date(shifted_year, 12, 31) - january_first).days * SECONDS_PER_DAY
            for visit_seq in range(visits):
                split_seed = visit_seq / visits + rng.random() / visits
                day = int(split_seed * span_seconds) // SECONDS_PER_DAY
                drawn.append((uniquepid, year, visit_seq, sampled_first_year, january_first + timedelta(days=day)))
    return drawn


def deidentify_order(n_rows: int) -> list[int]:
    """condition_value_shuffler: row i of a table takes the de-identified columns of row order[i], where order is
    `default_rng(0).choice(arange(n), n, replace=False)` drawn afresh for every table."""
    return np.random.default_rng(0).choice(np.arange(n_rows), n_rows, replace=False).tolist()


# The cost blocks in draw order: (event type, name column, id column, index into mean_costs).
COST_BLOCKS = (
    ("diagnosis", "diagnosisname", "diagnosisid", 0),
    ("lab", "labname", "labid", 0),
    ("treatment", "treatmentname", "treatmentid", 2),
    ("medication", "drugname", "medicationid", 3),
)


def draw_event_costs(rng: np.random.Generator, names: Mapping[str, Sequence[str]]) -> list[tuple]:
    """The cost table's draws: `mean_costs = rng.poisson(10, size=4)`, then for each of COST_BLOCKS (event type,
    index into mean_costs; `names[event type]` in order of first appearance in the finished event table) one
    `round(rng.normal(mean_costs[index], 1), 2)` per name (numpy's rounding of its float64, as published). The
    published blocks are diagnosis (mean 0), lab (mean 0: mean 1 is never used), treatment (2) and medication (3).
    Returns (event type, name, cost)."""
    mean_costs = rng.poisson(lam=10, size=4)
    return [(eventtype, name, float(round(rng.normal(loc=mean_costs[mean_index], scale=1.0), 2)))
            for eventtype, _, _, mean_index in COST_BLOCKS for name in names[eventtype]]
