"""Benchmark metrics (docs/benchmarks.md#metrics) as pure functions over plain values: no I/O, one implementation each.

- `ehrsql`: per-item `Outcome` (of a trial: `Outcome.of_trial`), the reliability score RS(c) of EHRSQL-2024 per run
  and over k runs, F1_ans and F1_exe of EHRSQL.
- `trials`: success (reward ≥ 1 − 1e-6), success rate over tasks, Pass@k, Pass^k and Gap-k over k trials per task.
- `retrieval`: FHIR retrieval precision and recall per question and their means.

Which answers are right is each published protocol's rule (`ehrbench.scoring`); these are the formulas over the
outcomes. The dashboard's SQL (`ehrbench.reports.aggregates`) computes the same.

Data-quality scoring (cluster recall, row precision, pass) lives in `ehrbench.dq.score`.
"""

from ehrbench.metrics.ehrsql import (
    RS_PENALTIES,
    Outcome,
    PrecisionRecall,
    RunScores,
    answerability_f1,
    as_percent,
    execution_f1,
    reliability_score,
    reliability_score_over_runs,
    reliability_scores,
    reliability_scores_over_runs,
)
from ehrbench.metrics.retrieval import RetrievalScore, mean_retrieval_score, retrieval_score
from ehrbench.metrics.trials import (
    SUCCESS_TOLERANCE,
    gap_k,
    is_success,
    pass_at_k,
    pass_at_k_mean,
    pass_hat_k,
    pass_hat_k_mean,
    success_rate,
    success_rate_over_tasks,
)

__all__ = [
    "RS_PENALTIES",
    "SUCCESS_TOLERANCE",
    "Outcome",
    "PrecisionRecall",
    "RetrievalScore",
    "RunScores",
    "answerability_f1",
    "as_percent",
    "execution_f1",
    "gap_k",
    "is_success",
    "mean_retrieval_score",
    "pass_at_k",
    "pass_at_k_mean",
    "pass_hat_k",
    "pass_hat_k_mean",
    "reliability_score",
    "reliability_score_over_runs",
    "reliability_scores",
    "reliability_scores_over_runs",
    "retrieval_score",
    "success_rate",
    "success_rate_over_tasks",
]
