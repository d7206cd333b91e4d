"""The verifier of the event-modelling tasks (docs/benchmarks.md#event-modelling-tasks): the workspace's
`predictions.csv` (subject_id, predicted_boolean_probability; one row per test patient) against the hidden test
labels. Pass = every test patient predicted with a finite probability, and the AUROC at least the baseline's
(HealthAgentBench's rule: reward 1 when auroc >= baseline_auroc)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from ehrbench.layout import WorkspaceTaskLayout
from ehrbench.tasks import Verdict

PREDICTIONS = "predictions.csv"
MAX_BYTES = 64 << 20  # a larger file is refused unread


def read_predictions(workspace: Path) -> tuple[dict[int, float], str | None]:
    """subject_id → probability from the workspace's predictions.csv, and why it cannot be scored (None if it can)."""
    path = workspace / PREDICTIONS
    if path.is_symlink() or (path.exists() and not path.is_file()):
        return {}, f"{PREDICTIONS}: not a regular file (a symbolic link is refused unread)"
    if not path.is_file():
        return {}, f"no {PREDICTIONS} in the workspace"
    if path.stat().st_size > MAX_BYTES:
        return {}, f"{PREDICTIONS}: larger than {MAX_BYTES >> 20} MiB"
    predictions: dict[int, float] = {}
    with path.open(newline="", encoding="utf-8", errors="replace") as handle:
        reader = csv.DictReader(handle)
        missing = {"subject_id", "predicted_boolean_probability"} - set(reader.fieldnames or [])
        if missing:
            return {}, f"{PREDICTIONS}: missing column(s) {', '.join(sorted(missing))}"
        for line, row in enumerate(reader, start=2):
            try:
                subject, probability = int(float(row["subject_id"])), float(row["predicted_boolean_probability"])
            except (TypeError, ValueError):
                return {}, f"{PREDICTIONS} line {line}: subject_id and predicted_boolean_probability must be numbers"
            if not math.isfinite(probability):
                return {}, f"{PREDICTIONS} line {line}: the probability is not a finite number"
            if subject in predictions:
                return {}, f"{PREDICTIONS} line {line}: subject {subject} is predicted twice"
            predictions[subject] = probability
    return predictions, None


def verify_modelling(task_dir: Path, workspace: Path) -> Verdict:
    task = WorkspaceTaskLayout(task_dir)
    gold = json.loads(task.task_json.read_text(encoding="utf-8"))
    labels = pq.read_table(task.gold / "test_labels.parquet", columns=["subject_id", "boolean_value"]).to_pydict()
    baseline = gold["baseline"]["auroc"]
    metrics = {"baseline_auroc": baseline, "test_subjects": len(labels["subject_id"]),
               "test_positive": int(sum(labels["boolean_value"]))}
    predictions, problem = read_predictions(workspace)
    if problem:
        return Verdict(False, 0.0, metrics, problem)
    lacking = [s for s in labels["subject_id"] if s not in predictions]
    metrics["missing_predictions"] = len(lacking)
    if lacking:
        return Verdict(False, 0.0, metrics, f"{len(lacking)} test patient(s) without a prediction, e.g. {lacking[0]}")
    from sklearn.metrics import average_precision_score, roc_auc_score  # scikit-learn loads only to score

    truth = np.asarray(labels["boolean_value"], dtype=bool)
    scores = np.asarray([predictions[s] for s in labels["subject_id"]])
    auroc = float(roc_auc_score(truth, scores))
    metrics.update(auroc=auroc, auprc=float(average_precision_score(truth, scores)))
    passed = auroc >= baseline
    return Verdict(passed, 1.0 if passed else 0.0, metrics,
                   None if passed else f"AUROC {auroc:.3f} is below the baseline's {baseline:.3f}")
