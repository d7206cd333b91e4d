"""FHIR retrieval precision and recall per question, with docs/benchmarks.md#fhir-retrieval-precision-and-recall's edge
cases (None = excluded).

precision = |pred ∩ gold| / |pred| and recall = |pred ∩ gold| / |gold| over resource ids compared as strings,
each id counted once. Both empty → 1 and 1 (nothing to find, nothing wrongly found); gold empty with
predictions → precision 0, recall excluded; gold non-empty without predictions → recall 0, precision excluded.
Excluding rather than scoring keeps an undefined ratio from counting as a success or a failure in the means.

An agent's mean precision is undefined (None) when it retrieved nothing in any question: its only defined
precisions would be the both-empty questions' 1s, and an agent that never retrieves (abstain) would score 100 %.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class RetrievalScore:
    precision: float | None  # None: excluded from the mean precision
    recall: float | None  # None: excluded from the mean recall
    retrieved: bool  # some resource was predicted (of a mean: in some question)


def retrieval_score(predicted: Iterable[object], gold: Iterable[object]) -> RetrievalScore:
    """The score of one question's retrieved ids against its gold ids."""
    pred, truth = {str(i) for i in predicted}, {str(i) for i in gold}
    if not pred and not truth:
        return RetrievalScore(precision=1.0, recall=1.0, retrieved=False)
    hits = len(pred & truth)
    return RetrievalScore(precision=hits / len(pred) if pred else None,
                          recall=hits / len(truth) if truth else None, retrieved=bool(pred))


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def mean_retrieval_score(scores: Iterable[RetrievalScore]) -> RetrievalScore:
    """Mean precision and mean recall over questions, each skipping the questions excluded from it; None when
    every question (or there is none) is excluded, and precision None when no question retrieved anything."""
    scores = list(scores)
    retrieved = any(s.retrieved for s in scores)
    return RetrievalScore(
        precision=_mean([s.precision for s in scores if s.precision is not None]) if retrieved else None,
        recall=_mean([s.recall for s in scores if s.recall is not None]), retrieved=retrieved)
