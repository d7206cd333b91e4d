"""FHIR-AgentBench's retrieval scores, as its published evaluator computes them (glee4810/FHIR-AgentBench
utils/core_utils.py at 9467654: `retrieval_recall(pred, true, zero_denom=1)` = 1 without gold ids, else
int(all gold ids in set(pred)); `retrieval_precision(pred, true, zero_denom=0)` = 0 without predictions, else
mean(pred_i in true) over the predicted list; the evaluator's pred keeps only the agent's ids of the gold's resource
types). Expected values worked out by hand from those rules."""

from __future__ import annotations

import pytest

from ehrbench.metrics.retrieval import published_mean, published_retrieval_score

CASES = [
    # (predicted by type, gold by type, precision, recall)
    ({}, {}, 0.0, 1.0),  # an empty gold ("no answer"): recall 1, precision 0
    ({"Observation": ["a"]}, {}, 0.0, 1.0),  # ids of types the gold lacks are not counted
    ({"Observation": ["a"]}, {"Observation": ["a", "b"]}, 1.0, 0.0),  # recall is all-or-nothing
    ({"Observation": ["a", "b", "c"]}, {"Observation": ["a", "b"]}, 2 / 3, 1.0),
    ({"Observation": ["a", "a"]}, {"Observation": ["a"]}, 1.0, 1.0),  # duplicates count in precision
    ({"Observation": ["a", "a", "x"]}, {"Observation": ["a"]}, 2 / 3, 1.0),
    ({"Observation": ["a"], "Encounter": ["e"]}, {"Observation": ["a"]}, 1.0, 1.0),  # Encounter not counted
    ({"Observation": ["a"]}, {"Observation": ["a"], "MedicationRequest": ["m"]}, 1.0, 0.0),
    ({"Observation": ["x", "a", "y", "z"]}, {"Observation": ["a"]}, 0.25, 1.0),
    ({}, {"Observation": ["a"]}, 0.0, 0.0),
    ({"Encounter": ["a"]}, {"Observation": ["a"]}, 0.0, 0.0),  # the right id under another type is not predicted
    ({"Medication": ["m1"], "MedicationRequest": ["r1", "r2"]},
     {"MedicationRequest": ["r1", "r2"], "Medication": ["m1", "m2"]}, 1.0, 0.0),
]


@pytest.mark.parametrize(("predicted", "gold", "precision", "recall"), CASES)
def test_one_question(predicted, gold, precision, recall):
    score = published_retrieval_score(predicted, gold)
    assert (score.precision, score.recall) == (pytest.approx(precision), recall)


def test_the_means_average_every_question_and_f1_is_of_the_means():
    scores = [published_retrieval_score(p, g) for p, g, _, _ in CASES[:4]]
    precision, recall, f1 = published_mean(scores)
    assert precision == pytest.approx((0 + 0 + 1 + 2 / 3) / 4) and recall == pytest.approx((1 + 1 + 0 + 1) / 4)
    assert f1 == pytest.approx(2 * precision * recall / (precision + recall))
    assert published_mean([]) == (None, None, None)
