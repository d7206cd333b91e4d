"""Operator slots of the EHRSQL templates (docs/benchmarks.md#ehrsql-time-expressions-and-operators): each option is a
phrase for the question and a SQL fragment
for the gold query. A template names the operators it uses; `{agg}` in its question is the phrase, `{{ agg }}` in its
SQL the fragment."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Operator:
    name: str
    text: str
    sql: str

    def __str__(self) -> str:  # `{{ agg }}` in a template's SQL
        return self.sql


OPERATORS: dict[str, tuple[tuple[str, str], ...]] = {
    # aggregate of a measured value
    "agg": (("average", "avg"), ("maximum", "max"), ("minimum", "min")),
    # comparison of a value with another or with a threshold
    "comparison": (("greater", ">"), ("less", "<")),
    # how many times an event happened
    "n_times": (("twice", "= 2"), ("two or more times", ">= 2")),
    # top-N of a ranking (DENSE_RANK() <= n)
    "n_rank": (("three", "3"), ("four", "4"), ("five", "5")),
    # age groups of admissions.age / patient.age
    "age_group": (("20s", "BETWEEN 20 AND 29"), ("30s", "BETWEEN 30 AND 39"), ("40s", "BETWEEN 40 AND 49"),
                  ("50s", "BETWEEN 50 AND 59"), ("60 or above", ">= 60")),
    # survival period in days (EHRSQL: 365/4, 365/2, 365)
    "survival_period": (("3-month", "365 / 4"), ("6-month", "365 / 2"), ("1-year", "365")),
    # elapsed time unit: seconds per unit
    "unit_count": (("hours", "3600"), ("days", "86400")),
    # highest / lowest value
    "sort": (("highest", "DESC"), ("lowest", "ASC")),
    # grouping of values by period: strftime format
    "unit_average": (("daily", "%Y-%m-%d"), ("monthly", "%Y-%m"), ("yearly", "%Y")),
}


def draw_operator(rng: np.random.Generator, name: str) -> Operator:
    if name not in OPERATORS:
        raise ValueError(f"unknown operator slot {name!r}; expected one of {', '.join(OPERATORS)}")
    options = OPERATORS[name]
    text, sql = options[int(rng.integers(len(options)))]
    return Operator(name, text, sql)
