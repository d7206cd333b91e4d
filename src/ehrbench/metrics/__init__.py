"""Benchmark metrics (docs/benchmarks.md#metrics) as pure functions over plain values: no I/O, one implementation each.

- `ehrsql`: per-item `Outcome`, the reliability score RS(c) of EHRSQL-2024, F1_ans and F1_exe of EHRSQL;
  answers are compared by `ehrbench.ehrsql.scoring.answers_match`.
- `trials`: success rate, Pass@k, Pass^k and Gap-k over k trials per task.
- `retrieval`: FHIR retrieval precision and recall per question and their means.

Data-quality scoring (cluster recall, row precision, pass) lives in `ehrbench.dq.score`.
"""

from ehrbench.metrics.ehrsql import (
    RS_PENALTIES,
    Outcome,
    PrecisionRecall,
    answerability_f1,
    as_percent,
    execution_f1,
    reliability_score,
    reliability_scores,
)
from ehrbench.metrics.retrieval import RetrievalScore, mean_retrieval_score, retrieval_score
from ehrbench.metrics.trials import gap_k, pass_at_k, pass_at_k_mean, pass_hat_k, pass_hat_k_mean, success_rate

__all__ = [
    "RS_PENALTIES",
    "Outcome",
    "PrecisionRecall",
    "RetrievalScore",
    "answerability_f1",
    "as_percent",
    "execution_f1",
    "gap_k",
    "mean_retrieval_score",
    "pass_at_k",
    "pass_at_k_mean",
    "pass_hat_k",
    "pass_hat_k_mean",
    "reliability_score",
    "reliability_scores",
    "retrieval_score",
    "success_rate",
]
