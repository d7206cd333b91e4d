"""The Harbor export of the demo build's workspace tasks (docs/benchmarks.md#harbor-export) and Harbor's job results
read back. Harbor's own task loader (`harbor` 0.26.0 needs Python >= 3.12, so it runs in an interpreter of its own
through uv) loads every exported task and its linter finds nothing; the exported test.sh and solve.sh, run under
Harbor's container contract (/app the agent's working directory, /tests uploaded after the agent, /solution for the
oracle, /logs/verifier/reward.json read back) with those paths mapped to folders here, give reward 1 after the solution
and 0 without it, importing the exported copy of ehrbench; `score-harbor` turns trial results validated by harbor's
own TrialResult model into result rows that `ehrbench metrics` reads."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import duckdb
import pytest

from tests.integration.ehrbench_cli import run_cli

pytestmark = pytest.mark.integration

HARBOR = "harbor==0.26.0"
PYTHON_312 = sorted(glob.glob("/root/.pyenv/versions/3.12*/bin/python3.12")) or [shutil.which("python3.12")]
UV = shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")
CHECK_TASKS = """
import json, sys
from pathlib import Path
from harbor.models.task.task import Task
root = Path(sys.argv[1])
print(json.dumps({d.name: [Task.is_valid_dir(d), Task(d).name, Task(d).config.environment.network_mode.value]
                  for d in sorted(root.iterdir()) if d.is_dir()}))
"""
CHECK_TRIALS = """
import sys
from pathlib import Path
from harbor.models.trial.result import TrialResult
for path in sys.argv[1:]:
    TrialResult.model_validate_json(Path(path).read_text())
print("valid")
"""


def _harbor(*args: str) -> subprocess.CompletedProcess:
    """A command in a Python 3.12 environment with harbor, made by uv (skips when there is no 3.12 or no uv)."""
    if not PYTHON_312[0] or not Path(UV).is_file():
        pytest.skip("harbor needs Python >= 3.12 and uv to make its environment; neither python3.12 nor uv found")
    return subprocess.run([UV, "run", "--no-project", "--python", PYTHON_312[0], "--with", HARBOR, *args],
                          capture_output=True, text=True, timeout=900, env={**os.environ, "DO_NOT_TRACK": "1"})


@pytest.fixture(scope="module")
def exported(demo, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("harbor") / "tasks"
    result = run_cli(["tasks", "export", str(out), "--format", "harbor", "--build", str(demo)], dict(os.environ))
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def test_every_workspace_task_is_exported_with_its_gold_hidden_from_the_agent(exported, demo):
    record = json.loads((exported / "ehrbench_export.json").read_text())
    assert record["build_id"] == demo.name
    families = sorted({t["family"] for t in record["tasks"].values()})
    assert families == ["dq", "event_modelling", "meds_conversion"] and len(record["tasks"]) == 12 + 4 + 3
    for folder, task in record["tasks"].items():
        root = exported / folder
        config = tomllib.loads((root / "task.toml").read_text())
        assert config["metadata"] == {"ehrbench_family": task["family"], "ehrbench_task_id": task["task_id"],
                                      "ehrbench_build_id": demo.name}
        assert config["environment"]["network_mode"] == "no-network"
        assert os.access(root / "tests" / "test.sh", os.X_OK) and os.access(root / "solution" / "solve.sh", os.X_OK)
        assert (root / "tests" / "task" / "gold").is_dir()
        # what the agent's image holds: the workspace and ehrbench's code, never the gold
        assert not [p for p in (root / "environment").rglob("*") if p.name in ("gold", "labels.parquet")
                    or p.name == "test_labels.parquet"]
        assert (root / "instruction.md").read_text() == (root / "environment" / "workspace" / "instruction.md"
                                                         ).read_text()


def test_harbors_own_loader_and_linter_accept_every_task(exported):
    loaded = _harbor("python", "-c", CHECK_TASKS, str(exported))
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    tasks = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert len(tasks) == 19
    assert all(valid and name.startswith("ehrbench/") and network == "no-network"
               for valid, name, network in tasks.values())
    assert tasks["meds_conversion__meds_conversion_01"][1] == "ehrbench/meds-conversion-01"
    linted = _harbor("harbor", "lint", "--json", "--ignore", "shared-verifier", *(str(p) for p in sorted(
        exported.iterdir()) if p.is_dir()))
    assert linted.returncode == 0 and json.loads(linted.stdout) == [], linted.stdout[-3000:] + linted.stderr[-2000:]


def _in_container(script: Path, mapped: dict[str, Path], vendor: Path) -> subprocess.CompletedProcess:
    """An exported script run as Harbor's container would, its absolute paths mapped to folders here, importing the
    exported copy of ehrbench (PYTHONPATH, as the image sets it)."""
    text = script.read_text()
    for container, here in mapped.items():
        text = text.replace(container, str(here))
    return subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(vendor)})


@pytest.mark.parametrize("folder", ["dq__combined", "meds_conversion__meds_conversion_01",
                                    "event_modelling__new_hypertension"])
def test_under_harbors_contract_the_solution_earns_reward_1_and_an_untouched_workspace_0(exported, tmp_path, folder):
    root = exported / folder
    app, logs = tmp_path / "app", tmp_path / "logs" / "verifier"
    shutil.copytree(root / "environment" / "workspace", app)  # the image's COPY workspace/ /app/
    mapped = {"/app": app, "/tests": root / "tests", "/logs/verifier": logs, "/solution": root / "solution"}
    vendor = root / "environment" / "vendor"
    imported = subprocess.run(["python", "-c", "import ehrbench; print(ehrbench.__file__)"], capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(vendor)}, cwd=tmp_path)
    assert imported.stdout.strip().startswith(str(vendor))
    untouched = _in_container(root / "tests" / "test.sh", mapped, vendor)
    assert untouched.returncode == 1, untouched.stderr[-2000:]  # Harbor ignores the exit status; the file counts
    assert json.loads((logs / "reward.json").read_text())["reward"] == 0.0
    solved = _in_container(root / "solution" / "solve.sh", mapped, vendor)
    assert solved.returncode == 0, solved.stderr
    verified = _in_container(root / "tests" / "test.sh", mapped, vendor)
    assert verified.returncode == 0, verified.stdout[-2000:] + verified.stderr[-2000:]
    reward = json.loads((logs / "reward.json").read_text())
    assert reward["reward"] == 1.0 and all(isinstance(v, float) for v in reward.values())


def _trial(exported: Path, folder: str, name: str, started: str, reward: float | None, error: str | None) -> dict:
    """A trial result as harbor 0.26 writes it (models/trial/result.py TrialResult, schema 1)."""
    path = str(exported / folder)
    return {
        "schema_version": 1, "id": f"00000000-0000-4000-8000-{abs(hash(name)) % 10**12:012d}", "task_name":
        f"ehrbench/{folder}", "trial_name": name, "trial_uri": f"file:///jobs/j/{name}", "task_id": {"path": path},
        "source": "tasks", "task_checksum": "x", "config": {"task": {"path": path}, "trial_name": name,
                                                             "environment": {"type": "docker"}},
        "agent_info": {"name": "claude-code", "version": "2.0", "model_info": {"name": "claude-x",
                                                                              "provider": "anthropic"}},
        "agent_result": {"n_input_tokens": 1200, "n_cache_tokens": None, "n_output_tokens": 300, "cost_usd": 0.02,
                         "model_usage": None, "rollout_details": None, "metadata": None},
        "verifier_result": None if reward is None else {"rewards": {"reward": reward, "auroc": 0.9}},
        "verifier_environment_mode": None,
        "exception_info": None if error is None else {
            "exception_type": "AgentTimeoutError", "exception_message": error, "exception_traceback": "",
            "occurred_at": started, "policy": None},
        "started_at": started, "finished_at": started.replace(":00Z", ":30Z"), "environment_setup": None,
        "agent_setup": None, "agent_execution": None, "verifier": None, "step_results": None}


def test_a_harbor_job_is_read_back_into_results_that_metrics_reads(exported, demo, demo_data, tmp_path):
    job = tmp_path / "jobs" / "2026-11-27__10-00-00"
    trials = [("event_modelling__new_hypertension", "new_hypertension__a", "2026-11-27T10:00:00Z", 1.0, None),
              ("event_modelling__new_hypertension", "new_hypertension__b", "2026-11-27T10:05:00Z", 0.0, None),
              ("meds_conversion__meds_conversion_02", "meds_conversion_02__c", "2026-11-27T10:01:00Z", None,
               "the agent ran out of time")]
    for folder, name, started, reward, error in trials:
        (job / name).mkdir(parents=True)
        (job / name / "result.json").write_text(json.dumps(_trial(exported, folder, name, started, reward, error)))
    (job / "result.json").write_text("{}")  # the job's own summary sits beside the trials
    validated = _harbor("python", "-c", CHECK_TRIALS, *(str(p) for p in sorted(job.glob("*/result.json"))))
    assert validated.returncode == 0 and "valid" in validated.stdout, validated.stderr[-3000:]

    data = str(demo_data.root)
    scored = run_cli(["tasks", "score-harbor", str(job), "--run-id", "harbor-it", "--data-dir", data],
                     dict(os.environ))
    assert scored.returncode == 0, scored.stderr[-3000:]
    assert "3 Harbor trial(s) of 1 agent(s), 1 passed, 1 without a reward" in scored.stdout
    rows = duckdb.sql(f"select * from read_parquet('{demo_data.results}/run_id=harbor-it/*.parquet') "
                      "order by task_id, trial").df()
    assert list(zip(rows["suite"], rows["task_id"], rows["trial"], rows["status"], rows["reward"], strict=True)) == [
        ("meds_conversion", "meds_conversion_02", 0, "error", 0.0),
        ("event_modelling", "new_hypertension", 0, "completed", 1.0),
        ("event_modelling", "new_hypertension", 1, "completed", 0.0)]
    assert set(rows["agent"]) == {"harbor:claude-code:claude-x"} and set(rows["build_id"]) == {demo.name}
    assert "the agent ran out of time" in rows.loc[0, "error"] and json.loads(rows.loc[1, "verifier_metrics"])[
        "auroc"] == 0.9
    metrics = run_cli(["metrics", "--run-id", "harbor-it", "--json", "--data-dir", data], dict(os.environ))
    assert metrics.returncode == 0, metrics.stderr[-3000:]
    table = {r["suite"]: r for r in map(json.loads, metrics.stdout.splitlines())}
    assert table["event_modelling"]["success_rate"] == 0.5 and table["meds_conversion"]["success_rate"] == 0.0
    again = run_cli(["tasks", "score-harbor", str(job), "--run-id", "harbor-it", "--data-dir", data],
                    dict(os.environ))
    assert again.returncode == 2 and "already has results" in again.stderr
