"""A build's workspace tasks as Harbor tasks (docs/benchmarks.md#harbor-export), so that terminal agents run by Harbor
(Codex CLI, Claude Code, OpenHands, ...) can be evaluated on them, and Harbor's job results read back as trial rows.

One Harbor task per workspace task (dq, meds_conversion, event_modelling), `<out>/<family>__<task_id>/`, in Harbor's
task format (harbor 0.26, schema 1.4; read from its package: models/task/{task,config,paths}.py, verifier/verifier.py):

    task.toml                    [task] name "ehrbench/<family>-<task id>" (Harbor's org/name), [metadata] (family,
                                 task id, build id),
                                 [verifier] / [agent] timeouts, [environment] resources and no network
    instruction.md               the task's instruction
    environment/Dockerfile       python:3.11-slim with the packages the sandbox offers, pinned to this environment's
                                 versions; ehrbench's own package at /opt/ehrbench (for the verifier); the workspace
                                 copied to /app, the agent's working directory
    environment/workspace/       the task's starting workspace (as ehrbench's harness makes it for a trial)
    environment/vendor/ehrbench/ ehrbench's source
    tests/test.sh                runs ehrbench's verifier on /app against /tests/task (the hidden gold, uploaded only
                                 after the agent is done) and writes Harbor's /logs/verifier/reward.json
    tests/task/gold/             the hidden gold
    solution/solve.sh            the oracle: copies solution/files/ (what the family's reference solution writes)
                                 into /app

`read_harbor_job` turns a Harbor job's trials (`<job>/<trial>/result.json`, harbor's TrialResult, schema 1) into
ehrbench trial rows (ehrbench.evaluation.results.TRIAL_SCHEMA) for `ehrbench tasks score-harbor`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import tomllib
from dataclasses import dataclass
from datetime import datetime
from importlib.metadata import version
from pathlib import Path

import ehrbench
from ehrbench.errors import ConfigError, MissingInputError
from ehrbench.layout import BuildLayout
from ehrbench.tasks import WORKSPACE_SUITES
from ehrbench.workspace.verify import family as task_family

HARBOR_SCHEMA_VERSION = "1.4"
WORKDIR = "/app"
BASE_IMAGE = "python:3.11-slim"
# what the agent's Python offers in ehrbench's own sandbox, and what the verifier imports, pinned to this environment
IMAGE_PACKAGES = ("pandas", "pyarrow", "duckdb", "numpy", "pyyaml", "pydantic", "meds", "scikit-learn", "polars",
                  "es-aces")
AGENT_TIMEOUT_S = 1800.0  # the LLM agent's default workspace_budget_s
VERIFIER_TIMEOUT_S = 600.0
EXPORT_RECORD = "ehrbench_export.json"  # what was exported from which build (score-harbor reads it)


@dataclass(frozen=True)
class ExportedTask:
    folder: str
    family: str
    task_id: str
    harbor_name: str


def workspace_tasks(build_dir: Path) -> list[tuple[str, Path]]:
    """(family, task folder) of every workspace task of a build: the audits and the workspace suites' tasks."""
    layout = BuildLayout(build_dir)
    found = [("dq", task.root) for task in layout.dq_tasks()]
    for family in WORKSPACE_SUITES:
        found += [(family, task.root) for task in layout.workspace_tasks_of(family)]
    return found


def harbor_folder(family: str, task_id: str) -> str:
    return f"{family}__{task_id}"


def export_harbor(build_dir: Path, out_dir: Path, families: tuple[str, ...] | None = None) -> list[ExportedTask]:
    """Write the build's workspace tasks (of `families`, default all) as Harbor tasks under `out_dir`, which must not
    exist or be empty: the export is written beside it and renamed into place whole."""
    tasks = [(f, t) for f, t in workspace_tasks(build_dir) if families is None or f in families]
    if not tasks:
        raise ConfigError(f"build {build_dir} has no workspace tasks{' of ' + ', '.join(families) if families else ''}")
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ConfigError(f"{out_dir}: exists and is not an empty folder; the export writes a folder of its own")
    build_id = BuildLayout(build_dir).root.resolve().name
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        exported = [_export_task(family, task_dir, staging, build_id) for family, task_dir in tasks]
        (staging / EXPORT_RECORD).write_text(json.dumps(
            {"build_id": build_id, "exported_at": datetime.now().astimezone().isoformat(),
             "ehrbench_version": version("ehrbench"),
             "tasks": {t.folder: {"family": t.family, "task_id": t.task_id} for t in exported}}, indent=2) + "\n")
        if out_dir.exists():
            out_dir.rmdir()
        os.replace(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return exported


def _export_task(family: str, task_dir: Path, out: Path, build_id: str) -> ExportedTask:
    spec = task_family(family)
    task_id = task_dir.name
    root = out / harbor_folder(family, task_id)
    environment, tests, solution = root / "environment", root / "tests", root / "solution"
    workspace = spec.prepare(task_dir, environment / "workspace")
    instruction = (workspace / "instruction.md").read_text(encoding="utf-8")
    (root / "instruction.md").write_text(instruction, encoding="utf-8")
    shutil.copytree(Path(ehrbench.__file__).parent, environment / "vendor" / "ehrbench",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (environment / "Dockerfile").write_text(_dockerfile(), encoding="utf-8")
    shutil.copytree(task_dir / "gold", tests / "task" / "gold")
    _script(tests / "test.sh", [
        "# ehrbench's verifier: what the agent left in the working directory against the hidden gold in /tests/task",
        f"cd {WORKDIR}",
        f"python -m ehrbench.workspace.verify {family} /tests/task {WORKDIR} "
        "--harbor-reward /logs/verifier/reward.json"])
    _write_solution(spec, task_dir, workspace, solution / "files")
    _script(solution / "solve.sh", ["# the reference solution's files (ehrbench.workspace.verify, the family's solve)",
                                    f"cp -r /solution/files/. {WORKDIR}/"])
    slug = task_id if task_id.startswith(family) else f"{family}_{task_id}"
    name = f"ehrbench/{slug.replace('_', '-')}"
    (root / "task.toml").write_text(_task_toml(name, family, task_id, build_id, instruction), encoding="utf-8")
    return ExportedTask(root.name, family, task_id, name)


def _write_solution(spec, task_dir: Path, workspace: Path, files: Path) -> None:
    """The files the family's reference solution adds or changes in a fresh workspace."""
    with tempfile.TemporaryDirectory(prefix="ehrbench-solution-") as scratch:
        solved = spec.prepare(task_dir, Path(scratch) / "workspace")
        spec.solve(task_dir, solved)
        for path in sorted(p for p in solved.rglob("*") if p.is_file()):
            relative = path.relative_to(solved)
            before = workspace / relative
            if not before.is_file() or before.read_bytes() != path.read_bytes():
                (files / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, files / relative)
        files.mkdir(parents=True, exist_ok=True)


def _dockerfile() -> str:
    pins = " ".join(f"{package}=={version(package)}" for package in IMAGE_PACKAGES)
    return (f"# ehrbench workspace task: the agent works in {WORKDIR}; no network at run time\n"
            f"FROM {BASE_IMAGE}\n"
            f"RUN pip install --no-cache-dir {pins}\n"
            "COPY vendor/ /opt/ehrbench/\n"
            "ENV PYTHONPATH=/opt/ehrbench\n"
            f"WORKDIR {WORKDIR}\n"
            f"COPY workspace/ {WORKDIR}/\n")


def _script(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/bash\nset -euo pipefail\n" + "\n".join(lines) + "\n", encoding="utf-8")
    path.chmod(0o755)


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def _task_toml(name: str, family: str, task_id: str, build_id: str, instruction: str) -> str:
    title = next((line.lstrip("# ").strip() for line in instruction.splitlines() if line.strip()), task_id)
    text = (f'schema_version = "{HARBOR_SCHEMA_VERSION}"\n\n'
            "[task]\n"
            f"name = {_toml_string(name)}\n"
            f"description = {_toml_string(title)}\n"
            f'keywords = ["ehr", "ehrbench", {_toml_string(family)}]\n\n'
            "[metadata]\n"
            f"ehrbench_family = {_toml_string(family)}\n"
            f"ehrbench_task_id = {_toml_string(task_id)}\n"
            f"ehrbench_build_id = {_toml_string(build_id)}\n\n"
            "[verifier]\n"
            f"timeout_sec = {VERIFIER_TIMEOUT_S}\n\n"
            "[agent]\n"
            f"timeout_sec = {AGENT_TIMEOUT_S}\n\n"
            "[environment]\n"
            "build_timeout_sec = 900.0\n"
            "cpus = 2\n"
            "memory_mb = 4096\n"
            'network_mode = "no-network"\n')
    tomllib.loads(text)  # ours must parse
    return text


def read_harbor_job(job_dir: Path, build_id: str | None = None) -> list[dict]:
    """One trial row per `<job_dir>/<trial>/result.json` of a Harbor job run on exported tasks: the task from the
    trial's task folder (`<family>__<task_id>`, looked up in the export's record), the reward Harbor read from
    ehrbench's verifier, the agent and its tokens. `build_id`: the build the tasks were exported from, when the
    export's record is not beside the task folder; a trial of a task not exported by ehrbench is a ConfigError."""
    results = sorted(job_dir.glob("*/result.json"))
    if not results:
        raise MissingInputError(f"{job_dir}: no <trial>/result.json; expected a Harbor job folder (jobs/<job name>/)")
    rows = []
    for path in results:
        try:
            trial = json.loads(path.read_text(encoding="utf-8"))
            task_path = Path(trial["config"]["task"]["path"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}: not a Harbor trial result (config.task.path: {exc})") from None
        family, task_id, exported_from = _exported_task(task_path, path)
        rows.append(_trial_row(trial, path.parent, family, task_id, exported_from or build_id))
    counters: dict[tuple, int] = {}
    for row in sorted(rows, key=lambda r: (r["started_at"].timestamp() if r["started_at"] else 0.0,
                                           r["workspace_path"])):
        key = (row["agent"], row["suite"], row["task_id"])
        row["trial"] = counters[key] = counters.get(key, -1) + 1
    missing = [r["workspace_path"] for r in rows if not r["build_id"]]
    if missing:
        raise ConfigError(f"{missing[0]}: the build the task was exported from is unknown (its export's "
                          f"{EXPORT_RECORD} is not beside the task folder); give it with --build")
    return rows


def _exported_task(task_path: Path, result: Path) -> tuple[str, str, str | None]:
    record = task_path.parent / EXPORT_RECORD
    if record.is_file():
        exported = json.loads(record.read_text(encoding="utf-8"))
        entry = exported["tasks"].get(task_path.name)
        if entry:
            return entry["family"], entry["task_id"], exported["build_id"]
    family, sep, task_id = task_path.name.partition("__")
    if not sep or family not in {"dq", *WORKSPACE_SUITES}:
        raise ConfigError(f"{result}: task {task_path} is not an ehrbench export (expected a folder "
                          "<family>__<task id> written by 'ehrbench tasks export --format harbor')")
    return family, task_id, None


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _trial_row(trial: dict, folder: Path, family: str, task_id: str, build_id: str | None) -> dict:
    agent = trial.get("agent_info") or {}
    model = agent.get("model_info") or {}
    model_name = f"{model.get('provider')}:{model['name']}" if model.get("name") else None
    usage = trial.get("agent_result") or {}
    rewards = (trial.get("verifier_result") or {}).get("rewards")
    exception = trial.get("exception_info")
    started, ended = _time(trial.get("started_at")), _time(trial.get("finished_at"))
    reward = rewards.get("reward") if rewards else None
    scored = reward is not None and trial.get("reward_valid", True)
    error = (f"{exception.get('exception_type')}: {exception.get('exception_message')}" if exception
             else None if scored else "Harbor recorded no reward (the verifier wrote no reward.json)")
    return {"build_id": build_id, "suite": family, "db": None, "task_id": task_id, "trial": 0,
            "agent": f"harbor:{agent.get('name') or 'agent'}" + (f":{model['name']}" if model.get("name") else ""),
            "model": model_name, "status": "completed" if scored else "error",
            "reward": float(reward) if scored else 0.0, "correct": bool(scored and float(reward) >= 1.0),
            "input_tokens": usage.get("n_input_tokens"), "output_tokens": usage.get("n_output_tokens"),
            "cost_usd": usage.get("cost_usd"), "error": error, "started_at": started, "ended_at": ended,
            "latency_s": (ended - started).total_seconds() if started and ended else None,
            "sandbox": f"harbor:{(trial.get('config') or {}).get('environment', {}).get('type') or 'environment'}",
            "workspace_path": str(folder), "verifier_metrics": json.dumps({**(rewards or {}), "problem": error}),
            "transcript": json.dumps({"harbor_trial": trial.get("trial_name"), "task_name": trial.get("task_name"),
                                      "agent": agent})}
