"""Seeded synonym renames (profile `renamed_random`, docs/benchmarks.md#seeded-random-renames): a fresh schema per
build, so a model cannot have memorised the names; the drawn map is recorded in the build manifest.

The draw is a pure function of (base rename, seed, vocabulary). Order of draws, on one
`random.Random(seed)`: one shuffle per table in the base's table order, then one shuffle per distinct
column name in order of first appearance (tables in order, columns in schema order).
"""

from __future__ import annotations

import copy
import functools
import random
from importlib import resources

import yaml

from ehrbench.renaming.schema_rename import SchemaRename, TableRename

Vocabulary = dict[str, dict[str, dict[str, list[str]]]]


def load_vocabulary() -> Vocabulary:
    """The curated vocabulary: {database: {"tables": {name: [synonyms]}, "columns": {name: [synonyms]}}}."""
    return copy.deepcopy(_packaged_vocabulary())


@functools.cache
def _packaged_vocabulary() -> Vocabulary:
    # Parsed once per process: the builds and tests draw many times, and PyYAML is slow.
    text = resources.files("ehrbench.renaming").joinpath("vocabulary.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def _synonyms(vocabulary: Vocabulary, database: str, kind: str, name: str) -> list[str]:
    synonyms = (vocabulary[database].get(kind) or {}).get(name)
    if not synonyms:
        singular = kind.removesuffix("s")
        raise ValueError(f"the vocabulary has no synonyms for {singular} {name!r} of database {database!r}")
    return list(synonyms)


def _first_free(rng: random.Random, candidates: list[str], taken: set[str], what: str) -> str:
    rng.shuffle(candidates)
    for candidate in candidates:
        if candidate not in taken:
            return candidate
    raise ValueError(f"every synonym of {what} collides with a name already drawn: {', '.join(sorted(candidates))}")


def draw_random_rename(base: SchemaRename, seed: int, vocabulary: Vocabulary | None = None) -> SchemaRename:
    """A rename from `base`'s target schema to synonyms drawn with `seed`.

    A column name gets one synonym in the whole database, so join keys (patientid, …) stay joinable.
    Table names are unique in the database and column names unique within each table: a drawn synonym
    that is taken falls through to the next one in the seeded shuffle."""
    vocabulary = _packaged_vocabulary() if vocabulary is None else vocabulary
    database = base.database
    if database not in vocabulary:
        raise ValueError(f"the vocabulary has no database {database!r} (it has {', '.join(sorted(vocabulary))})")
    rng = random.Random(seed)

    table_names: dict[str, str] = {}
    for table in base.tables:
        candidates = _synonyms(vocabulary, database, "tables", table.target)
        table_names[table.target] = _first_free(rng, candidates, set(table_names.values()), f"table {table.target!r}")

    # Names that share a table must not receive the same synonym.
    neighbours: dict[str, set[str]] = {}
    for table in base.tables:
        names = [target for _, target in table.columns]
        for name in names:
            neighbours.setdefault(name, set()).update(other for other in names if other != name)

    column_names: dict[str, str] = {}
    for name in neighbours:  # dict order = first appearance
        candidates = _synonyms(vocabulary, database, "columns", name)
        taken = {column_names[other] for other in neighbours[name] if other in column_names}
        column_names[name] = _first_free(rng, candidates, taken, f"column {name!r}")

    return SchemaRename(
        database,
        tuple(
            TableRename(
                table.target,
                table_names[table.target],
                tuple((target, column_names[target]) for _, target in table.columns),
            )
            for table in base.tables
        ),
    )
