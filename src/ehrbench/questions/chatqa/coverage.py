"""Coverage of the curated tables on a database: how many entries match its stored values (`demo_coverage`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ehrbench.questions.chatqa.lay_terms import LAY_KINDS, LayTerms
from ehrbench.questions.chatqa.stored_values import DICTIONARY_VALUES, USED_VALUES
from ehrbench.warehouse import open_duckdb


@dataclass
class CoverageReport:
    """Per table: entries, entries matching stored values, and the entries that match nothing."""

    entries: Counter = field(default_factory=Counter)
    matched: Counter = field(default_factory=Counter)
    used: Counter = field(default_factory=Counter)  # entries with a value in the event tables
    unmatched: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, dict[str, int]]:
        return {name: {"entries": self.entries[name], "matched": self.matched[name], "used": self.used[name]}
                for name in self.entries}


def demo_coverage(lay_terms: LayTerms, databases: Mapping[str, Path]) -> CoverageReport:
    """How many curated entries match stored values of `databases` ({"mimic_iv" | "eicu": compatibility-schema
    DuckDB file}): lay terms by exact value (event tables, or MIMIC-IV's dictionaries); brand/generic pairs by the
    generic or the brand inside a stored drug name; classes by >= 2 members; alternative labs by the alternative's
    stored name. An entry matching nothing is listed in `unmatched`."""
    used: dict[str, set[str]] = {kind: set() for kind in (*LAY_KINDS, "drugs")}
    known: dict[str, set[str]] = {kind: set() for kind in LAY_KINDS}
    used_by_db: dict[str, dict[str, set[str]]] = {}
    for database, path in databases.items():
        con = open_duckdb(str(path), read_only=True)
        try:
            values = {kind: {row[0] for row in con.execute(sql).fetchall() if row[0] is not None}
                      for kind, sql in USED_VALUES[database].items()}
            for kind, sql in DICTIONARY_VALUES.get(database, {}).items():
                known[kind] |= {row[0] for row in con.execute(sql).fetchall() if row[0] is not None}
        finally:
            con.close()
        used_by_db[database] = values
        for kind, found in values.items():
            used[kind] |= found
    report = CoverageReport()
    for kind in LAY_KINDS:
        for term in lay_terms.terms[kind]:
            report.entries[kind] += 1
            in_events = any(v in used[kind] for v in term.values)
            report.used[kind] += in_events
            if in_events or any(v in known[kind] for v in term.values):
                report.matched[kind] += 1
            else:
                report.unmatched.append(f"{kind}: {term.lay}")
    drugs = used["drugs"]
    for pair in lay_terms.brands:
        report.entries["brand_generic"] += 1
        exact = any(name in drugs for name in (*pair.generic_names, pair.brand))
        report.used["brand_generic"] += exact
        if exact or any(_contains_any(d, (pair.generic, pair.brand)) for d in drugs):
            report.matched["brand_generic"] += 1
        else:
            report.unmatched.append(f"brand_generic: {pair.brand}/{pair.generic}")
    for drug_class in lay_terms.classes.values():
        report.entries["drug_classes"] += 1
        present = [m for m in lay_terms.class_names(drug_class) if any(m in d for d in drugs)]
        if len(present) >= 2:
            report.matched["drug_classes"] += 1
            report.used["drug_classes"] += 1
        else:
            report.unmatched.append(f"drug_classes: {drug_class.name} (present: {present})")
    for pair in lay_terms.alternative_labs:
        report.entries["alternative_labs"] += 1
        present = any(pair.alternative.get(db) in found.get("labs", set()) for db, found in used_by_db.items())
        report.matched["alternative_labs"] += present
        report.used["alternative_labs"] += present
        if not present:
            report.unmatched.append(f"alternative_labs: {pair.asked['lay']} -> {pair.alternative['lay']}")
    return report


def _contains_any(text: str, names: Iterable[str]) -> bool:
    return any(name in text for name in names)
