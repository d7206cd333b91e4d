"""The README's deployment workflow against a REAL Prefect server (not ephemeral mode), on PostgreSQL as `make server`
runs it.

A PostgreSQL cluster of the project's own (ehrbench.stack.postgres), `prefect server start` on it on a free
(non-default) port with a temporary PREFECT_HOME, the `local` process work pool, a worker, `prefect --no-prompt deploy
--all` from the repository's prefect.yaml, then runs of `build-benchmark/demo` and `evaluate-agents/nightly` through
the API, the nightly at full size (> 2,000 trial task runs) with both CPUs busy, and the UI in a browser. The data
directory is a copy of the session's demo build (tests/integration/conftest.py), so the deployment's build is a second
build in a data directory that has one; the repository's data/ is never touched. Every process is started in its own
session and its whole process group is stopped at teardown (worker before server; the worker needs a second SIGTERM).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import httpx
import pyarrow.parquet as pq
import pytest

from ehrbench.stack.postgres import LocalPostgres, PostgresError, binaries
from ehrbench.stack.prefect_server import SERVER_SETTINGS
from tests.browser import chromium_page, screenshot
from tests.integration.conftest import copy_data_dir

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).with_name("prefect"))
STAGES = ("ingest", "transform", "validate", "databases", "fhir", "questions", "dq", "noteqa", "meds", "publish")
# the databases stage's dbt runs are subflows of their own: the side stages' models, then the profiles
SUBFLOWS = (*STAGES, "side-stage-inputs", "profiles")
ARTIFACT_KEYS = {"ingest-files", "ingest-summary", "transform-dbt", "validation-results",
                 "validation-summary", "databases", "fhir", "questions", "questions-validation",
                 "questions-data-docs", "dq-tasks", "noteqa", "noteqa-validation", "meds", "build-published",
                 "build-summary"}
FINAL_STATES = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _base_env(prefect_home: Path) -> dict[str, str]:
    """The caller's environment without any Prefect or ehrbench setting, plus an isolated PREFECT_HOME.

    Explicit variables win over the repository's .env, which Prefect reads when run from the repo root."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "EHRBENCH_"))}
    env.update(DO_NOT_TRACK="1", PREFECT_SERVER_ANALYTICS_ENABLED="false",
               DBT_SEND_ANONYMOUS_USAGE_STATS="false", PREFECT_HOME=str(prefect_home),
               PREFECT_PROFILES_PATH=str(prefect_home / "profiles.toml"))
    return env


def _log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _run_logs(logs: Path) -> str:
    """What a failed run's assertion shows: the worker's log tail and the server's first request exceptions (a 500's
    traceback is only in the server's log)."""
    server = (logs / "server.log").read_text(errors="replace") if (logs / "server.log").exists() else ""
    start = server.find("Encountered exception in request")
    errors = "\n".join(server[start:].splitlines()[:80]) if start >= 0 else "(no request exception)"
    return f"--- worker log ---\n{_log_tail(logs / 'worker.log', 60)}\n--- server exceptions ---\n{errors}"


def _process_groups(leader: int) -> set[int]:
    """The process group `leader` and those of all its descendants (Linux /proc).

    Prefect's process worker starts each flow run in a session of its own, which outlives the worker."""
    children: dict[int, list[int]] = {}
    group_of: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            pid = int(stat.parent.name)
            children.setdefault(int(fields[1]), []).append(pid)
            group_of[pid] = int(fields[2])
    todo = [pid for pid, group in group_of.items() if group == leader]
    seen: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo.extend(children.get(pid, []))
    return {leader} | {group_of[pid] for pid in seen}


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Background:
    """A long-running Prefect command in its own session (process group = pid), logging to a file."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], cwd: Path, log_dir: Path):
        self.name, self.log = name, log_dir / f"{name}.log"
        self.groups: set[int] = set()
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen([PREFECT, *args], env=env, cwd=cwd, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    def alive(self) -> bool:
        return any(_group_alive(group) for group in self.groups | {self.proc.pid})

    def stop(self) -> None:
        """SIGTERM its process groups twice (Prefect's worker exits on the second), then SIGKILL."""
        self.groups = _process_groups(self.proc.pid)
        for sig in (signal.SIGTERM, signal.SIGTERM, signal.SIGKILL):
            for group in self.groups:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, sig)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                self.proc.poll()  # reap the leader so that its group can disappear
                if not self.alive():
                    return
                time.sleep(0.25)


def _run(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 180) -> str:
    result = subprocess.run([PREFECT, *args], env=env, cwd=cwd, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"prefect {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL cluster as `make server` makes it, in a folder under /tmp (pytest's own tmp folders are closed to
    the `postgres` user that runs the server when the tests run as root)."""
    try:
        binaries()
    except PostgresError as exc:
        if os.environ.get("CI"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    cluster = LocalPostgres(Path(tempfile.mkdtemp(prefix="ehrbench-test-pg-")))
    try:
        yield cluster.start()
    finally:
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)


@pytest.fixture
def prefect_stack(tmp_path: Path, postgres_url: str) -> Iterator[dict]:
    """A real Prefect server on PostgreSQL on a free port and its URL; the test adds the worker to `processes`."""
    home, logs = tmp_path / "prefect", tmp_path / "logs"
    home.mkdir()
    logs.mkdir()
    port = _free_port()
    assert port != 4200  # the UI must follow the server to another port
    api_url = f"http://127.0.0.1:{port}/api"
    processes: list[Background] = []
    try:
        # what `make server` sets: the database, and the UI's API address on the chosen port
        server_env = {**_base_env(home), "PREFECT_SERVER_DATABASE_CONNECTION_URL": postgres_url,
                      "PREFECT_SERVER_API_HOST": "127.0.0.1", "PREFECT_SERVER_API_PORT": str(port),
                      "PREFECT_UI_API_URL": api_url, "PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED": "true",
                      "PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED": "true", **SERVER_SETTINGS}
        server = Background("server", ["server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            server_env, tmp_path, logs)
        processes.append(server)
        deadline = time.monotonic() + 180
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{api_url}/health", timeout=2).status_code == 200:
                    break
            assert server.proc.poll() is None, f"Prefect server exited:\n{_log_tail(server.log)}"
            assert time.monotonic() < deadline, \
                f"Prefect server not healthy after 180 s:\n{_log_tail(server.log)}"
            time.sleep(0.5)
        yield {"api_url": api_url, "home": home, "logs": logs, "processes": processes, "tmp": tmp_path, "port": port}
    finally:
        for process in reversed(processes):  # worker (added last) before server
            process.stop()
        leftovers = [p.name for p in processes if p.alive()]
        assert not leftovers, f"processes left behind: {leftovers}"


class _RetryingTransport(httpx.HTTPTransport):
    """Retries 502/503/504 with backoff, as Prefect's own client does: the server answers 503 while its
    SQLite database is busy (seen when the suite runs on two workers). Reads (GET, POST …/filter) are also
    retried when the busy server does not answer in time; a run-creating POST never is (no duplicate runs)."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        is_read = request.method == "GET" or request.url.path.endswith("/filter")
        for delay in (0.5, 1, 2, 4, 8, 15, 30):
            try:
                response = super().handle_request(request)
            except (httpx.TimeoutException, httpx.ConnectError):
                if not is_read:
                    raise
            else:
                if response.status_code not in (502, 503, 504):
                    return response
                response.close()
            time.sleep(delay)
        return super().handle_request(request)


def _run_deployment(api: httpx.Client, flow_and_deployment: str, timeout: float,
                    parameters: dict | None = None) -> tuple[dict, list, set]:
    """Run a deployment through the REST API and wait for a final state.

    Returns the flow run, its subflow runs (with their flow's name) and the keys of their artifacts.
    Plain HTTP: importing Prefect here would read the repository's .env (PREFECT_HOME=data/prefect)."""
    deployment = api.get(f"/deployments/name/{flow_and_deployment}").raise_for_status().json()
    flow_run = api.post(f"/deployments/{deployment['id']}/create_flow_run",
                        json={"parameters": parameters} if parameters else {}).raise_for_status().json()
    deadline = time.monotonic() + timeout
    while flow_run["state"]["type"] not in FINAL_STATES:
        assert time.monotonic() < deadline, f"flow run still {flow_run['state']['type']} after {timeout} s"
        time.sleep(2)
        flow_run = api.get(f"/flow_runs/{flow_run['id']}").raise_for_status().json()
    subflows = api.post("/flow_runs/filter", json={
        "flow_runs": {"parent_flow_run_id": {"any_": [flow_run["id"]]}}}).raise_for_status().json()
    for run in subflows:
        run["flow_name"] = api.get(f"/flows/{run['flow_id']}").raise_for_status().json()["name"]
    artifacts = api.post("/artifacts/filter", json={
        "artifacts": {"flow_run_id": {"any_": [flow_run["id"], *(r["id"] for r in subflows)]}}},
    ).raise_for_status().json()
    return flow_run, subflows, {a["key"] for a in artifacts if a["key"]}


def test_deployment_builds_demo_benchmark_on_real_server(mimic_demo_dir, eicu_demo_dir, demo_build, prefect_stack):
    api_url, home, logs, tmp = (prefect_stack[k] for k in ("api_url", "home", "logs", "tmp"))
    data_dir = tmp / "data"
    copy_data_dir(demo_build["snapshot"], data_dir)
    old = data_dir / "benchmarks" / demo_build["folder"].name
    old_manifest = (old / "manifest.json").read_text()
    client_env = {**_base_env(home), "PREFECT_API_URL": api_url}

    _run(["work-pool", "create", "local", "--type", "process"], client_env, tmp)

    # The worker is the flow runs' environment: it knows the server and the data directory, but not
    # the repo or the source folders, which must come from the deployment (prefect.yaml templating).
    worker_env = {**client_env, "EHRBENCH_DATA_DIR": str(data_dir), "PREFECT_WORKER_QUERY_SECONDS": "2",
                  "EHRBENCH_REPORT_DIR": str(tmp / "site")}
    prefect_stack["processes"].append(Background(
        "worker", ["worker", "start", "--pool", "local", "--name", "pytest-worker"], worker_env, tmp, logs))

    deploy_env = {**client_env, "EHRBENCH_REPO_DIR": str(REPO), "EHRBENCH_MIMIC_IV_DIR": str(mimic_demo_dir),
                  "EHRBENCH_EICU_DIR": str(eicu_demo_dir)}
    out = _run(["--no-prompt", "deploy", "--all"], deploy_env, REPO)
    assert "build-benchmark/demo" in out

    # `{{ $VAR }}` in prefect.yaml is resolved at deploy time, in the pull step and in the parameters.
    with httpx.Client(base_url=api_url, timeout=30, transport=_RetryingTransport()) as api:
        deployment = api.get("/deployments/name/build-benchmark/demo").raise_for_status().json()
        assert deployment["pull_steps"] == [
            {"prefect.deployments.steps.set_working_directory": {"directory": str(REPO)}}]
        assert deployment["parameters"]["mimic_iv_dir"] == str(mimic_demo_dir)
        assert deployment["parameters"]["eicu_dir"] == str(eicu_demo_dir)

        # another seed than the deployment's (parameters given to a run override the deployment's); without the
        # mimic_iv_on_fhir view, which the suite's demo build has (a minute less on the suite's longest path)
        run, subflows, artifact_keys = _run_deployment(api, "build-benchmark/demo", timeout=600,
                                                       parameters={"seed": 7, "mimic_iv_on_fhir": False})
    assert run["state"]["type"] == "COMPLETED", f"{run['state']}\n{_run_logs(logs)}"

    assert sorted(r["flow_name"] for r in subflows) == sorted(SUBFLOWS), subflows
    assert all(r["state"]["type"] == "COMPLETED" for r in subflows), [r["state"] for r in subflows]
    assert artifact_keys >= ARTIFACT_KEYS, f"missing artifacts: {ARTIFACT_KEYS - artifact_keys}"

    manifest = json.loads((data_dir / "benchmarks" / "latest" / "manifest.json").read_text())
    assert manifest["parameters"]["mimic_iv_dir"] == str(mimic_demo_dir)
    assert manifest["parameters"]["eicu_dir"] == str(eicu_demo_dir)
    assert manifest["parameters"]["seed"] == 7 and manifest["parameters"]["strict_checksums"] is False
    assert manifest["parameters"]["mimic_iv_on_fhir"] is False and not manifest["fhir"]["views"]
    unverified = {f"{f['dataset']}.{f['table']}" for f in manifest["inputs"] if f["status"] == "unverified"}
    assert "mimic_iv.chartevents" in unverified
    assert not (REPO / "data" / "benchmarks" / manifest["build_id"]).exists()

    # a second build in the data directory: the raw tables are reused, the first build is untouched and still listed
    new = data_dir / "benchmarks" / manifest["build_id"]
    assert new != old and os.readlink(data_dir / "benchmarks" / "latest") == new.name
    assert {f["action"] for f in manifest["inputs"]} == {"unchanged", "absent"}
    assert (old / "manifest.json").read_text() == old_manifest  # published builds are immutable
    picked = [set(pq.read_table(build / "dq" / "combined" / "gold" / "labels.parquet").column("row_id").to_pylist())
              for build in (old, new)]
    assert picked[0] and picked[1] and picked[0] != picked[1]  # another seed picks other rows for the audit errors
    listing = subprocess.run([str(Path(sys.executable).with_name("ehrbench")), "builds", "--data-dir", str(data_dir)],
                             env=client_env, capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    rows = [line for line in listing.stdout.splitlines() if old.name in line or new.name in line]
    assert len(rows) == 2 and "* " + new.name in "\n".join(rows)

    # task runs say what they make (no `make_task-972`), and the Data Docs link points into the published folder
    with httpx.Client(base_url=api_url, timeout=30, transport=_RetryingTransport()) as api:
        task_runs = api.post("/task_runs/filter", json={"flow_runs": {"id": {"any_": [
            run["id"], *(r["id"] for r in subflows)]}}}).raise_for_status().json()
        unnamed = [t["name"] for t in task_runs if re.fullmatch(r"[a-z_-]+-[0-9a-f]{3}", t["name"])]
        assert task_runs and not unnamed, unnamed
        assert {"load/mimic_iv-demo", "generate-questions/eicu", "make-audit-task/combined"} <= {
            t["name"] for t in task_runs}
        (docs,) = api.post("/artifacts/filter", json={"artifacts": {"key": {"any_": ["questions-data-docs"]}}},
                           ).raise_for_status().json()
        assert f"/benchmarks/{manifest['build_id']}/reports/gx/index.html" in docs["data"]
        assert ".tmp" not in docs["data"]
        (summary,) = api.post("/artifacts/filter", json={"artifacts": {"key": {"any_": ["build-summary"]}}},
                              ).raise_for_status().json()
        assert summary["flow_run_id"] == run["id"] and manifest["build_id"] in summary["data"]
        assert "/artifacts/key/questions-validation" in summary["data"]

    # the nightly evaluation: scheduled, runs on the build just published — 150 tasks per suite (its own size is 200;
    # with noteqa's 200 tasks that lengthened the suite's longest path), still more than 1,000 trial task runs — while
    # both CPUs are busy, and compares with its previous run (one trial per task: two doubled this test's longest
    # stretch and kept the suite's other worker from a CPU for minutes)
    with httpx.Client(base_url=api_url, timeout=30, transport=_RetryingTransport()) as api:
        nightly = api.get("/deployments/name/evaluate-agents/nightly").raise_for_status().json()
        (schedule,) = [s["schedule"] for s in nightly["schedules"]]
        assert (schedule["cron"], schedule["timezone"]) == ("0 2 * * *", "UTC")
        # one spinning process beside the run's own (flow, server, PostgreSQL) and the suite's other test worker
        with busy_cpus(max(1, (os.cpu_count() or 2) - 1)):
            started = time.monotonic()
            first, _, first_keys = _run_deployment(api, "evaluate-agents/nightly", timeout=1500,
                                                   parameters={"trials": 1, "limit": 150})
            seconds = time.monotonic() - started
        assert first["state"]["type"] == "COMPLETED", f"{first['state']}\n{_run_logs(logs)}"
        first_run_id = _run_id_of(data_dir, first)
        trials = duckdb.sql(f"select count(*) from read_parquet('{data_dir}/results/run_id={first_run_id}/"
                            "part-*.parquet')").fetchone()[0]
        assert trials >= 1200  # 612 tasks (150 per question suite and noteqa, 12 dq) × 2 agents
        # the server records task runs from their events, behind the run: wait until it holds every one
        deadline, trial_runs = time.monotonic() + 300, 0
        while trial_runs < trials and time.monotonic() < deadline:
            trial_runs = api.post("/task_runs/count", json={  # not the task run standing for the dashboard subflow
                "flow_runs": {"id": {"any_": [first["id"]]}},
                "task_runs": {"subflow_runs": {"exists_": False}}}).raise_for_status().json()
            time.sleep(2)
        print(f"nightly on PostgreSQL, CPUs busy: {trials} trials in {seconds:.0f} s, {trial_runs} task runs recorded")
        assert trial_runs == trials
        assert "evaluation-metrics" in first_keys and "evaluation-comparison" not in first_keys
        assert {"evaluation-report", "evaluation-report-summary", "evaluation-summary"} <= first_keys
        assert first_run_id in (tmp / "site" / "index.html").read_text()

        time.sleep(1.1)  # run ids carry the UTC second
        second, _, second_keys = _run_deployment(api, "evaluate-agents/nightly", timeout=300,
                                                 parameters={"limit": 4})
        assert second["state"]["type"] == "COMPLETED", f"{second['state']}\n{_run_logs(logs)}"
        assert "evaluation-comparison" in second_keys
    runs = sorted((data_dir / "results").glob("run_id=nightly-*"))
    assert len(runs) == 2 and all(list(run.glob("part-*.parquet")) for run in runs)

    # `ehrbench follow` shows a run's own lines, not its thousands of task runs
    followed = subprocess.run([str(Path(sys.executable).with_name("ehrbench")), "follow", "--deployment",
                               "evaluate-agents/nightly", "--data-dir", str(data_dir)], env=client_env,
                              capture_output=True, text=True, timeout=120)
    assert followed.returncode == 0, followed.stderr
    lines = followed.stderr.splitlines()
    second_run_id = runs[-1].name.removeprefix("run_id=")
    assert any(line.startswith(f"run {second_run_id} on build ") for line in lines)
    assert any(line.startswith("trials done: ") for line in lines) and lines[-1].endswith(": Completed")
    assert any(line.startswith("dashboard: file://") for line in lines)  # no file server in this test
    assert len(lines) < 40 and not any("/ehrsql/" in line for line in lines), lines  # no trial's lines
    trends = (tmp / "site" / "trends.html").read_text()  # the second run's dashboard shows both nightly runs
    assert all(run.name.removeprefix("run_id=") in trends for run in runs)

    # the UI of a server on a non-default port talks to that port, and lists the deployments
    with chromium_page() as page:
        page.goto(f"http://127.0.0.1:{prefect_stack['port']}/deployments", wait_until="networkidle")
        page.get_by_text("nightly", exact=True).first.wait_for(timeout=60_000)
        assert page.get_by_text("demo", exact=True).count() >= 1
        screenshot(page, "prefect-ui-deployments")
        api_calls = [url for url in page.requested if "/api/" in url]
        assert api_calls and all(url.startswith(api_url) for url in api_calls), api_calls[:5]
        assert not any(":4200/" in url for url in page.requested)


def _run_id_of(data_dir: Path, flow_run: dict) -> str:
    """The run id a nightly flow run wrote its results under: its prefix and its scheduled (expected) start time."""
    expected = datetime.fromisoformat(flow_run["expected_start_time"]).astimezone(UTC)
    run_id = "nightly-" + expected.strftime("%Y%m%dT%H%M%SZ")
    assert (data_dir / "results" / f"run_id={run_id}").is_dir(), sorted((data_dir / "results").iterdir())
    return run_id


@contextlib.contextmanager
def busy_cpus(count: int) -> Iterator[None]:
    """`count` processes spinning at normal priority: a machine busy with other work."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
