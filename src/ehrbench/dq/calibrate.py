"""Calibration of a build's audit tasks (stage dq): the oracle (every gold row flagged) must pass every variant of a
task, and the rule-based reference auditor's scores say how hard the task is for a model-free baseline. Also the
build manifest's `dq` entry."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ehrbench.dq.auditor import audit, write_flagged_rows
from ehrbench.dq.extract import Tables
from ehrbench.dq.recipes import RecipeBook
from ehrbench.dq.score import score_task
from ehrbench.dq.tasks import WrittenTask, write_oracle
from ehrbench.errors import ValidationError
from ehrbench.layout import AuditTaskLayout


def calibrate_task(variants: list[WrittenTask]) -> dict:
    """The oracle's score on every variant folder of a task, and the rule-based auditor's (the variants share their
    data, so it runs once)."""
    with tempfile.TemporaryDirectory() as scratch:
        oracle = [score_task(e.folder, write_oracle(e.folder, Path(scratch) / f"{e.task_id}.csv")) for e in variants]
        flagged = Path(scratch) / "auditor.csv"
        write_flagged_rows(audit(AuditTaskLayout(variants[0].folder).data), flagged)
        auditor = score_task(variants[0].folder, flagged)
    return {"task": variants[0].recipe_id, "clusters": variants[0].clusters,
            "oracle_passed": all(score.passed for score in oracle),
            "auditor_recall": round(auditor.recall, 4), "auditor_precision": round(auditor.precision, 4),
            "auditor_f1": round(auditor.f1, 4), "auditor_passed": auditor.passed,
            "auditor_flagged_rows": auditor.flagged_rows, "auditor_recall_by_family": auditor.recall_by_family}


def check_oracle_passes(calibration: list[dict]) -> None:
    """Raise ValidationError when the gold labels of a task do not pass the task itself."""
    failed = [row["task"] for row in calibration if not row["oracle_passed"]]
    if failed:
        raise ValidationError(f"the gold labels do not pass their own task(s) {', '.join(failed)}")


def manifest_entry(recipes: RecipeBook, recipe_file: Path | None, extract: Tables, written: list[WrittenTask],
                   calibration: list[dict], build_dir: Path) -> dict:
    """The manifest's `dq` entry: the recipes (their file, or "default"), extract size, tasks (folders relative to
    the build) and calibration scores."""
    return {"recipes": str(recipe_file) if recipe_file else "default",
            "recipe_book": recipes.model_dump(),
            "extract_rows": {table: len(frame) for table, frame in extract.items()},
            "tasks": [entry.to_dict(build_dir) for entry in written],
            "calibration": calibration}
