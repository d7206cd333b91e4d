"""Run a task's recipes over a copy of the audit extract: seeded errors, their labels, and the errors a recipe
asked for but found no row for (reported, not silently dropped)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ehrbench.dq.corruption import Corruption, Label
from ehrbench.dq.extract import Tables
from ehrbench.dq.facts import ClinicalFacts, load_facts
from ehrbench.dq.injectors import INJECTORS, Scope
from ehrbench.dq.recipes import Recipe, TaskRecipe
from ehrbench.seeding import keyed_rng


@dataclass
class InjectedTask:
    task: TaskRecipe
    extract: Tables  # the pristine extract the task was made from
    tables: Tables
    labels: list[Label]
    shortfalls: dict[str, int] = field(default_factory=dict)  # "family/subtype" -> errors without a row to use

    @property
    def clusters(self) -> int:
        return len({label.cluster_id for label in self.labels})


def inject_task(extract: Tables, task: TaskRecipe, seed: int, facts: ClinicalFacts | None = None) -> InjectedTask:
    """The corrupted copy of `extract` for `task`. Each (task, recipe, sub-type) draws from its own generator keyed by
    the build seed, so changing one recipe moves no other recipe's errors."""
    facts = facts or load_facts()
    corruption = Corruption(extract, task.id)
    shortfalls: Counter = Counter()
    for recipe in task.recipes:
        patients = _patients_in_scope(extract, recipe, keyed_rng(seed, "dq", task.id, recipe.family, "patients",
                                                                 str(recipe.seed)))
        for subtype in recipe.subtypes:
            injector = INJECTORS[recipe.family][subtype]
            tables = tuple(t for t in injector.tables if recipe.tables is None or t in recipe.tables)
            scope = Scope(corruption, facts, tables, patients)
            rng = keyed_rng(seed, "dq", task.id, recipe.family, subtype, str(recipe.seed))
            for _ in range(recipe.count):
                changes = injector.inject(scope, rng)
                if changes is None:
                    shortfalls[f"{recipe.family}/{subtype}"] += 1
                else:
                    corruption.commit(recipe.family, subtype, changes)
    return InjectedTask(task, extract, corruption.result(), corruption.labels, dict(shortfalls))


def _patients_in_scope(extract: Tables, recipe: Recipe, rng: np.random.Generator) -> set[str] | None:
    if recipe.patients is None:
        return None
    patients = sorted(extract["patients"]["patient_id"])
    chosen = rng.choice(len(patients), size=min(recipe.patients, len(patients)), replace=False)
    return {patients[i] for i in chosen}
