"""FHIR retrieval precision and recall per question, with docs/benchmarks.md#fhir-retrieval-precision-and-recall's edge
cases (None = excluded).

precision = |pred ∩ gold| / |pred| and recall = |pred ∩ gold| / |gold| over resource ids compared as strings,
each id counted once. Both empty → 1 and 1 (nothing to find, nothing wrongly found); gold empty with
predictions → precision 0, recall excluded; gold non-empty without predictions → recall 0, precision excluded.
Excluding rather than scoring keeps an undefined ratio from counting as a success or a failure in the means.

An agent's mean precision is undefined (None) when it retrieved nothing in any question: its only defined
precisions would be the both-empty questions' 1s, and an agent that never retrieves (abstain) would score 100 %.

`published_retrieval_score` and `published_mean` are FHIR-AgentBench's own definitions (binary recall, precision
over the gold's resource types), for numbers printed beside the paper's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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


def ids_by_type(pairs: Iterable[tuple[str, object]]) -> dict[str, list[str]]:
    """(resource type, id) pairs as resource type -> ids, in order (repeats kept)."""
    grouped: dict[str, list[str]] = {}
    for kind, resource_id in pairs:
        grouped.setdefault(kind, []).append(str(resource_id))
    return grouped


def published_retrieval_score(predicted: Mapping[str, Sequence[object]],
                              gold: Mapping[str, Sequence[object]]) -> RetrievalScore:
    """One question's retrieval precision and recall as FHIR-AgentBench's evaluator computes them
    (glee4810/FHIR-AgentBench utils/core_utils.py at 9467654, `retrieval_recall`, `retrieval_precision`, and its
    evaluator's `extract_relevant_resources_only`), from ids by resource type:

    - the predicted ids are those of the resource types the gold has, concatenated (duplicates kept): an agent is
      not penalised for resources of other types;
    - recall is binary: 1 when every gold id is predicted (and when the gold is empty), else 0;
    - precision is the share of predicted ids that are gold ids, counting duplicates; 0 when nothing is predicted
      (so a question with an empty gold scores precision 0, recall 1).
    Never None: the published means average every question."""
    pred = [str(i) for kind in gold for i in predicted.get(kind, ())]
    truth = [str(i) for ids in gold.values() for i in ids]
    recall = 1.0 if not truth else float(set(truth) <= set(pred))
    precision = 0.0 if not pred else sum(i in set(truth) for i in pred) / len(pred)
    return RetrievalScore(precision=precision, recall=recall, retrieved=bool(pred))


def published_mean(scores: Iterable[RetrievalScore]) -> tuple[float | None, float | None, float | None]:
    """Mean precision, mean recall over every question, and the F1 of those two means, as FHIR-AgentBench reports
    them (`print_performance_summary`); None for no question."""
    scores = list(scores)
    if not scores:
        return None, None, None
    precision = sum(s.precision for s in scores) / len(scores)
    recall = sum(s.recall for s in scores) / len(scores)
    return precision, recall, (2 * precision * recall / (precision + recall) if precision + recall else 0.0)
