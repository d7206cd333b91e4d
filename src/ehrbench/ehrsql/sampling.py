"""The seeded draws of the EHRSQL-2024 MIMIC-IV build (docs/benchmarks.md#ehrsql-2024-seeded-draws (draws (a)-(d))).

The published build takes every random number from one `numpy.random.default_rng(seed)`, in a fixed
order. These functions make the same numpy calls in the same order, so a caller that runs them in
sequence on one generator (or hands the generator state from one step to the next with
`rng_state` / `restore_rng`) reproduces the published cohort and cost values exactly.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable, Sequence

import numpy as np


def new_rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def rng_state(rng: np.random.Generator) -> str:
    """The generator's state as JSON (PCG64 state integers are exact in JSON)."""
    return json.dumps(rng.bit_generator.state)


def restore_rng(state: str) -> np.random.Generator:
    rng = np.random.default_rng()
    rng.bit_generator.state = json.loads(state)
    return rng


def draw_first_years(rng: np.random.Generator, n_subjects: int, start_year: int, time_span: int) -> list[int]:
    """(a) one first-admission year per patient, later years more likely (weights 1..span+1)."""
    end_year = start_year + time_span
    weights = np.array(range(1, time_span + 2))
    prob = weights / sum(weights)
    return [int(rng.choice(range(start_year, end_year + 1), p=prob)) for _ in range(n_subjects)]


def _unique_in_order(values: Iterable[Hashable]) -> list:
    return list(dict.fromkeys(values))


def sample_cohort(rng: np.random.Generator, admissions: Sequence[tuple[Hashable, bool]], num_patients: int,
                  current_ratio: float) -> tuple[list, list]:
    """(b) and (c): `admissions` is (patient id, is_current) per admission (or stay) in table order.

    Returns (current, discharged) patient ids, as given (MIMIC-IV's integer subject ids, eICU's text uniquepids:
    the draws depend on the pool sizes only). When a pool is smaller than its target, numpy raises before drawing
    and the whole pool is taken (as the published builds do).
    """
    num_current = int(num_patients * current_ratio)
    num_discharged = num_patients - int(num_patients * current_ratio)

    current_pool = _unique_in_order(s for s, is_current in admissions if is_current)
    try:
        current = rng.choice(np.array(current_pool, dtype=object), num_current, replace=False).tolist()
    except ValueError:
        current = list(current_pool)
    chosen = set(current)
    discharged_pool = _unique_in_order(s for s, is_current in admissions if not is_current and s not in chosen)
    try:
        discharged = rng.choice(np.array(discharged_pool, dtype=object), num_discharged, replace=False).tolist()
    except ValueError:
        discharged = list(discharged_pool)
    return current, discharged


def draw_mean_costs(rng: np.random.Generator) -> list[int]:
    """(d) first part: the four mean costs (diagnoses, labs, procedures, prescriptions)."""
    return [int(m) for m in rng.poisson(lam=10, size=4)]


def draw_costs(rng: np.random.Generator, keys: Iterable, mean: int) -> dict:
    """(d) one cost per distinct key, in sorted key order, rounded like the original (numpy round)."""
    return {key: float(round(rng.normal(loc=np.int64(mean), scale=1.0), 2)) for key in sorted(set(keys))}


def draw_cost_table(rng: np.random.Generator, blocks: Sequence[tuple[str, Iterable]]) -> dict[str, list]:
    """(d) whole: `blocks` are (event_type, keys) for diagnoses, labs, procedures and prescriptions in that
    order; returns the columns event_type, cost_key (the key as text) and cost."""
    if len(blocks) != 4:
        raise ValueError(f"cost draws need the 4 event blocks (diagnoses, labs, procedures, prescriptions), "
                         f"got {len(blocks)}")
    means = draw_mean_costs(rng)
    columns: dict[str, list] = {"event_type": [], "cost_key": [], "cost": []}
    for (event_type, keys), mean in zip(blocks, means, strict=True):
        for key, cost in draw_costs(rng, keys, mean).items():
            columns["event_type"].append(event_type)
            columns["cost_key"].append(str(key))
            columns["cost"].append(cost)
    return columns
