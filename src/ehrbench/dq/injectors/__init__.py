"""Error injectors, one module per family (docs/benchmarks.md#data-quality-error-injection and two of ehrbench's own:
temporal violations, orphan
references). An injector makes one error: it picks unclaimed rows with the seeded generator it is given and returns
the error's changes (or None when no row qualifies); `ehrbench.dq.inject` commits them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ehrbench.dq.corruption import Change, Corruption
from ehrbench.dq.facts import ClinicalFacts


@dataclass(frozen=True)
class Scope:
    """What one error may touch: the task's corruption, the tables the recipe allows, the patients in scope."""

    corruption: Corruption
    facts: ClinicalFacts
    tables: tuple[str, ...]
    patients: set[str] | None = None

    def available(self, table: str):
        return self.corruption.available(table, self.patients)

    def tables_among(self, rng: np.random.Generator, candidates) -> list[str]:
        """The allowed tables among `candidates`, in a seeded order (sorted first: the order depends on the seed
        only)."""
        return [str(table) for table in rng.permutation(sorted(set(self.tables) & set(candidates)))]


@dataclass(frozen=True)
class Injector:
    tables: tuple[str, ...]  # the tables it corrupts (changes or inserts rows in)
    inject: Callable[[Scope, np.random.Generator], list[Change] | None]


def _registry() -> dict[str, dict[str, Injector]]:
    from ehrbench.dq.injectors import demographic, inconsistency, references, temporal, values

    return {"impossible_values": values.INJECTORS, "inconsistency": inconsistency.INJECTORS,
            "demographic_contradiction": demographic.INJECTORS, "temporal_violation": temporal.INJECTORS,
            "orphan_reference": references.INJECTORS}


INJECTORS: dict[str, dict[str, Injector]] = _registry()
