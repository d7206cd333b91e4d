"""The verifiers of workspace tasks: what an agent left in its workspace against the task's hidden gold, as a binary
reward with diagnostic metrics. One function per task family; also a script for harnesses that run agents elsewhere
(e.g. a Harbor task's tests):

    python -m ehrbench.workspace.verify dq <task folder> <workspace>     # prints the verdict as JSON; exit 0 = pass

Families:
- `dq` (data-quality audit, docs/benchmarks.md#data-quality-audit-score): the workspace's `flagged_rows.csv`
  against `gold/labels.parquet`; pass = every error cluster caught and row precision >= 1 %.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ehrbench.dq.score import Submission, read_labels, read_submission, score
from ehrbench.layout import AuditTaskLayout

AUDIT_SUBMISSION = "flagged_rows.csv"  # what the audit instruction asks the agent to write


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reward: float  # 1.0 when passed, else 0.0
    metrics: dict = field(default_factory=dict)
    problem: str | None = None  # why the submission counted as empty or was partly ignored

    def to_dict(self) -> dict:
        return asdict(self)


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


VERIFIERS: dict[str, Callable[[Path, Path], Verdict]] = {"dq": verify_audit}


def verify(family: str, task_dir: Path, workspace: Path) -> Verdict:
    """The verdict of `family`'s verifier; a family without one is a ValueError naming those there are."""
    try:
        verifier = VERIFIERS[family]
    except KeyError:
        raise ValueError(f"no verifier for task family {family!r}; the families are {', '.join(VERIFIERS)}") from None
    return verifier(task_dir, workspace)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ehrbench.workspace.verify",
                                     description="Verify what an agent left in a workspace task's folder.")
    parser.add_argument("family", choices=sorted(VERIFIERS))
    parser.add_argument("task_dir", type=Path, help="the task's folder in the build (with its hidden gold)")
    parser.add_argument("workspace", type=Path, help="the folder the agent worked in")
    args = parser.parse_args(argv)
    verdict = verify(args.family, args.task_dir, args.workspace)
    print(json.dumps(verdict.to_dict(), indent=2, sort_keys=True))
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
