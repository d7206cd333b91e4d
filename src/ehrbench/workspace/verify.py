"""Workspace task families (docs/benchmarks.md#workspace-tasks): for each, how a trial's fresh workspace is made from
the task, its verifier (what the agent left there against the task's hidden gold, as a binary reward with diagnostic
metrics) and its reference solution (the oracle's). The verifier is also a script for harnesses that run agents
elsewhere (e.g. a Harbor task's tests):

    python -m ehrbench.workspace.verify <family> <task folder> <workspace>   # prints the verdict as JSON; exit 0 = pass

Families:
- `dq` (data-quality audit, docs/benchmarks.md#data-quality-audit-score): the workspace's `flagged_rows.csv`
  against `gold/labels.parquet`; pass = every error cluster caught and row precision >= 1 %.
- `meds_conversion` (docs/benchmarks.md#meds-conversion-tasks): the workspace's `meds/data/*.parquet` against
  `gold/events.parquet`; pass = MEDS schema and order, and the same events (content hash).
- `event_modelling` (docs/benchmarks.md#event-modelling-tasks): the workspace's `predictions.csv` against
  `gold/test_labels.parquet`; pass = every test patient predicted and AUROC >= the baseline's.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from ehrbench.dq.score import Submission, read_labels, read_submission, score
from ehrbench.layout import AuditTaskLayout, WorkspaceTaskLayout
from ehrbench.meds.conversion_verify import OUTPUT_DIR, verify_conversion
from ehrbench.meds.convert import convert, csv_relation, write_meds_data
from ehrbench.meds.event_config import load_event_config
from ehrbench.meds.modelling_verify import PREDICTIONS, verify_modelling
from ehrbench.tasks import Verdict

AUDIT_SUBMISSION = "flagged_rows.csv"  # what the audit instruction asks the agent to write


def prepare_audit_workspace(task_dir: Path, workspace: Path) -> Path:
    """A fresh workspace of an audit task: its instruction and tables (never its gold)."""
    task = AuditTaskLayout(task_dir)
    return write_audit_workspace(task.instruction.read_text(encoding="utf-8"), task.data, workspace)


def write_audit_workspace(instruction: str, data_dir: Path, workspace: Path) -> Path:
    """`instruction.md` and a copy of the tables' `data/` in `workspace` (created)."""
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "instruction.md").write_text(instruction, encoding="utf-8")
    shutil.copytree(data_dir, workspace / "data")
    return workspace


def audit_submission(workspace: Path) -> Submission:
    """The rows the agent flagged in its workspace's flagged_rows.csv. A symbolic link is refused unread: the
    evaluator must not read, for the agent, a file the agent could not (ehrbench.dq.score refuses FIFOs and huge
    files the same way)."""
    path = workspace / AUDIT_SUBMISSION
    if path.is_symlink():
        return Submission(set(), f"refused submission {AUDIT_SUBMISSION}: it is a symbolic link, not a regular file")
    return read_submission(path)


def verify_audit(task_dir: Path, workspace: Path) -> Verdict:
    audit = score(read_labels(task_dir), audit_submission(workspace))
    return Verdict(passed=audit.passed, reward=1.0 if audit.passed else 0.0, metrics=audit.to_dict(),
                   problem=audit.submission_problem)


def solve_audit(task_dir: Path, workspace: Path) -> None:
    """The oracle's audit: the labelled rows as flagged_rows.csv."""
    labels = pq.read_table(AuditTaskLayout(task_dir).labels, columns=["table", "row_id"]).to_pylist()
    rows = sorted({(r["table"], str(r["row_id"])) for r in labels})
    (workspace / AUDIT_SUBMISSION).write_text("table,_row_id\n" + "".join(f"{t},{r}\n" for t, r in rows))


def prepare_task_workspace(task_dir: Path, workspace: Path) -> Path:
    """A fresh workspace of a workspace task: its instruction and a copy of its starting folder (never its gold)."""
    task = WorkspaceTaskLayout(task_dir)
    shutil.copytree(task.workspace, workspace)
    shutil.copyfile(task.instruction, workspace / "instruction.md")
    return workspace


def solve_conversion(task_dir: Path, workspace: Path) -> None:
    """The reference conversion: ehrbench.meds.convert over the workspace's files alone (no gold)."""
    events = convert(load_event_config(workspace / "event_config.yaml"), csv_relation(workspace / "data"))
    write_meds_data(events, workspace / OUTPUT_DIR)


def solve_modelling(task_dir: Path, workspace: Path) -> None:
    """The oracle's predictions: the hidden test labels as probabilities (AUROC 1)."""
    labels = pq.read_table(WorkspaceTaskLayout(task_dir).gold / "test_labels.parquet").to_pylist()
    (workspace / PREDICTIONS).write_text("subject_id,predicted_boolean_probability\n" + "".join(
        f"{row['subject_id']},{float(row['boolean_value'])}\n" for row in labels))


@dataclass(frozen=True)
class Family:
    name: str
    prepare: Callable[[Path, Path], Path]  # (task folder, new workspace) -> the workspace
    verify: Callable[[Path, Path], Verdict]  # (task folder, workspace)
    solve: Callable[[Path, Path], None]  # (task folder, workspace): the reference solution, in place


FAMILIES = {f.name: f for f in (Family("dq", prepare_audit_workspace, verify_audit, solve_audit),
                                Family("meds_conversion", prepare_task_workspace, verify_conversion,
                                       solve_conversion),
                                Family("event_modelling", prepare_task_workspace, verify_modelling, solve_modelling))}
VERIFIERS: dict[str, Callable[[Path, Path], Verdict]] = {name: f.verify for name, f in FAMILIES.items()}


def family(name: str) -> Family:
    """A family by name; an unknown one is a ValueError naming those there are."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"no workspace task family {name!r}; the families are {', '.join(FAMILIES)}") from None


def verify(family_name: str, task_dir: Path, workspace: Path) -> Verdict:
    """The verdict of the family's verifier."""
    return family(family_name).verify(task_dir, workspace)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ehrbench.workspace.verify",
                                     description="Verify what an agent left in a workspace task's folder.")
    parser.add_argument("family", choices=sorted(VERIFIERS))
    parser.add_argument("task_dir", type=Path, help="the task's folder in the build (with its hidden gold)")
    parser.add_argument("workspace", type=Path, help="the folder the agent worked in")
    parser.add_argument("--harbor-reward", type=Path, metavar="PATH",
                        help="also write the verdict as Harbor's reward.json: reward and the numeric metrics")
    args = parser.parse_args(argv)
    verdict = verify(args.family, args.task_dir, args.workspace)
    print(json.dumps(verdict.to_dict(), indent=2, sort_keys=True))
    if args.harbor_reward:
        args.harbor_reward.parent.mkdir(parents=True, exist_ok=True)
        args.harbor_reward.write_text(json.dumps(harbor_reward(verdict)) + "\n")
    return 0 if verdict.passed else 1


def harbor_reward(verdict: Verdict) -> dict[str, float]:
    """Harbor reads a flat object of finite numbers (harbor verifier/verifier.py): `reward`, then every numeric
    metric (a flag as 0 or 1)."""
    numbers = {key: float(value) for key, value in sorted(verdict.metrics.items())
               if isinstance(value, int | float) and math.isfinite(value)}
    return {"reward": verdict.reward, **{k: v for k, v in numbers.items() if k != "reward"}}


if __name__ == "__main__":
    sys.exit(main())
