"""Workspace tasks' verifier for the audit family: the workspace a task prepares (no gold in it), the verdict of what an
agent left there (binary reward, the audit scorer's metrics), a symbolic link refused unread, and the script harnesses
run (`python -m ehrbench.workspace.verify`, exit 0 only on a pass)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ehrbench.workspace.verify import prepare_audit_workspace, verify
from tests.unit.test_dq_score import LABELS


@pytest.fixture()
def task(tmp_path):
    """An audit task folder as a build writes it: instruction, tables, hidden gold."""
    folder = tmp_path / "dq" / "combined"
    (folder / "data").mkdir(parents=True)
    (folder / "gold").mkdir()
    (folder / "instruction.md").write_text("# Data-quality audit\nWrite flagged_rows.csv.\n")
    (folder / "data" / "labs.csv.gz").write_bytes(gzip.compress(b"_row_id,value\naaaa000000000001,120\n"))
    pq.write_table(pa.Table.from_pylist(LABELS), folder / "gold" / "labels.parquet")
    return folder


ONE_PER_CLUSTER = "table,_row_id\nlabs,aaaa000000000001\nlabs,aaaa000000000003\npatients,bbbb000000000001\n"


def test_the_workspace_has_the_instruction_and_tables_and_no_gold(task, tmp_path):
    workspace = prepare_audit_workspace(task, tmp_path / "ws")
    assert sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*")) == [
        "data", "data/labs.csv.gz", "instruction.md"]
    assert (workspace / "instruction.md").read_text() == (task / "instruction.md").read_text()


def test_catching_every_cluster_passes_and_missing_one_fails(task, tmp_path):
    workspace = prepare_audit_workspace(task, tmp_path / "ws")
    (workspace / "flagged_rows.csv").write_text(ONE_PER_CLUSTER)
    verdict = verify("dq", task, workspace)
    assert (verdict.passed, verdict.reward, verdict.problem) == (True, 1.0, None)
    assert (verdict.metrics["recall"], verdict.metrics["precision"], verdict.metrics["clusters"]) == (1.0, 1.0, 3)
    (workspace / "flagged_rows.csv").write_text("table,_row_id\nlabs,aaaa000000000001\n")
    verdict = verify("dq", task, workspace)
    assert (verdict.passed, verdict.reward) == (False, 0.0)
    assert verdict.metrics["recall"] == pytest.approx(1 / 3)


def test_no_submission_or_a_link_to_another_file_scores_as_nothing(task, tmp_path):
    workspace = prepare_audit_workspace(task, tmp_path / "ws")
    empty = verify("dq", task, workspace)
    assert not empty.passed and "no submission" in empty.problem
    elsewhere = tmp_path / "elsewhere.csv"
    elsewhere.write_text(ONE_PER_CLUSTER)  # would pass, read through the link
    (workspace / "flagged_rows.csv").symlink_to(elsewhere)
    linked = verify("dq", task, workspace)
    assert not linked.passed and "symbolic link" in linked.problem and linked.metrics["flagged_rows"] == 0


def test_an_unknown_family_names_the_known_ones(task, tmp_path):
    with pytest.raises(ValueError, match=r"no workspace task family 'event'; the families are dq, meds_conversion"):
        verify("event", task, tmp_path)


def test_the_script_prints_the_verdict_and_exits_0_only_on_a_pass(task, tmp_path):
    workspace = prepare_audit_workspace(task, tmp_path / "ws")
    command = [sys.executable, "-m", "ehrbench.workspace.verify", "dq", str(task), str(workspace)]
    failed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1 and json.loads(failed.stdout)["reward"] == 0.0
    (workspace / "flagged_rows.csv").write_text(ONE_PER_CLUSTER)
    passed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert passed.returncode == 0, passed.stderr
    assert json.loads(passed.stdout)["passed"] is True


def test_the_script_writes_harbors_reward_file_of_finite_numbers(task, tmp_path):
    """Harbor reads /logs/verifier/reward.json as a flat object of finite numbers (harbor verifier/verifier.py)."""
    workspace = prepare_audit_workspace(task, tmp_path / "ws")
    (workspace / "flagged_rows.csv").write_text(ONE_PER_CLUSTER)
    reward = tmp_path / "logs" / "verifier" / "reward.json"
    command = [sys.executable, "-m", "ehrbench.workspace.verify", "dq", str(task), str(workspace),
               "--harbor-reward", str(reward)]
    assert subprocess.run(command, capture_output=True, text=True, timeout=120).returncode == 0
    written = json.loads(reward.read_text())
    assert written["reward"] == 1.0 and written["recall"] == 1.0 and written["passed"] == 1.0
    assert all(isinstance(v, float) for v in written.values())
