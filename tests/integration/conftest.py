"""Fixtures shared by the integration tests: the demo build of the CLI (built once per test session) and the FHIR
view's warehouse."""

from __future__ import annotations

import csv
import fcntl
import gzip
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ehrbench.profiles import profile_vars
from ehrbench.sources import release_for
from ehrbench.sources.ingest import ingest_release
from ehrbench.transform import run_dbt
from ehrbench.warehouse import connect
from tests.conftest import EHRSQL_2024
from tests.integration.ehrbench_cli import EHRBENCH, run_cli


@pytest.fixture(scope="session")
def prefect_api_url():
    """A Prefect test server for the CLI's runs (and the tests that start flows in-process)."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    from ehrbench.stack.prefect_server import use_server_settings

    use_server_settings()  # the server's settings of every run of ehrbench's (the harness's server reads them)
    with prefect_test_harness(server_startup_timeout=180):
        yield PREFECT_API_URL.value()


@pytest.fixture(scope="session")
def cli_env(prefect_api_url, mimic_demo_dir, eicu_demo_dir, tmp_path_factory):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EHRBENCH_", "PREFECT_"))}
    home = tmp_path_factory.mktemp("prefect-home")
    env.update(PREFECT_API_URL=prefect_api_url, DO_NOT_TRACK="1", PREFECT_HOME=str(home),
               PREFECT_PROFILES_PATH=str(home / "profiles.toml"),
               EHRBENCH_MIMIC_IV_DIR=str(mimic_demo_dir), EHRBENCH_EICU_DIR=str(eicu_demo_dir),
               EHRBENCH_REPORT_DIR=str(tmp_path_factory.mktemp("report") / "site"))
    if EHRSQL_2024.is_dir():  # the published questions to ground in FHIR resources
        env["EHRBENCH_EHRSQL2024_DIR"] = str(EHRSQL_2024)
    return env


@pytest.fixture(scope="session")
def demo_build(cli_env, tmp_path_factory, worker_id) -> dict:
    """The demo build by `ehrbench build` (in the background: while it holds the warehouse, a second build must fail
    fast), made once per test run whatever the number of pytest-xdist workers: the first worker to ask builds it,
    under a lock in the folder all workers' temporary folders share, and the others wait for it. Its data directory
    (`data_dir`) is test_build_cli's, which adds to it (evaluations, failing builds) but changes no build; `snapshot`
    is a copy taken right after the build, for tests that build again in a copy of their own."""
    shared = _shared_folder(tmp_path_factory, worker_id, "demo-build")
    record = shared / "build.json"
    with (shared / "lock").open("a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not record.is_file():
            built = _build_demo(shared / "data", cli_env)
            copy_data_dir(shared / "data", shared / "snapshot")
            record.write_text(json.dumps(built))
    built = json.loads(record.read_text())
    return {**built, "data_dir": shared / "data", "snapshot": shared / "snapshot", "folder": Path(built["folder"])}


def _shared_folder(tmp_path_factory, worker_id: str, name: str) -> Path:
    """A folder in the one all pytest-xdist workers' temporary folders share (the session's own without xdist)."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if worker_id != "master" else base) / name
    shared.mkdir(exist_ok=True)
    return shared


def _build_demo(data_dir: Path, cli_env: dict) -> dict:
    first = subprocess.Popen([EHRBENCH, "build", "--data-dir", str(data_dir)], env=cli_env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lock = data_dir / "build.lock"
    deadline = time.monotonic() + 300
    while not (lock.exists() and lock.read_text().strip()) and first.poll() is None:
        assert time.monotonic() < deadline, "first build never took the build lock"
        time.sleep(0.2)
    started = time.monotonic()
    second = run_cli(["build", "--data-dir", str(data_dir)], cli_env)
    second_seconds = time.monotonic() - started
    out, err = first.communicate(timeout=900)
    assert first.returncode == 0, err[-3000:]
    return {"folder": out.strip().splitlines()[-1], "stdout": out, "stderr": err,
            "second_returncode": second.returncode, "second_stderr": second.stderr, "second_seconds": second_seconds}


def copy_data_dir(source: Path, target: Path) -> None:
    """The raw tables, the warehouse, dbt's parse and the published builds of a data directory; not its runs, logs,
    task sets or lock."""
    skipped = {"results", "logs", "run", "tasksets", "build.lock"}
    shutil.copytree(source, target, symlinks=True,
                    ignore=lambda folder, names: [n for n in names if Path(folder) == source and n in skipped])


@pytest.fixture(scope="session")
def fhir_warehouse(mimic_demo_dir, tmp_path_factory, worker_id):
    """A warehouse with the MIMIC-IV demo, its staging, the ehrsql2024 profile with its lineage and both FHIR views
    (fhir__mimic_iv; fhir__mimic_iv_on_fhir in its own file beside it) built with their dbt tests (read-only from the
    tests); made once per test run, like demo_build."""
    root = _shared_folder(tmp_path_factory, worker_id, "fhir")
    path = root / "warehouse.duckdb"
    with (root / "lock").open("a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "built").is_file():
            path.unlink(missing_ok=True)
            with connect(path) as con:
                ingest_release(con, release_for("mimic_iv"), mimic_demo_dir, origin="local")
            run_dbt(["run", "--select", "staging.mimic_iv", "ehrsql2024", "lineage__ehrsql2024__mimic_iv"],
                    warehouse=path, work_dir=root / "dbt", vars=profile_vars(0))
            run = run_dbt(["build", "--select", "fhir", "mimic_iv_on_fhir_race"], warehouse=path,
                          work_dir=root / "dbt", vars=profile_vars(0))
            assert run.count("error") == 0 and run.count("fail") == 0, run.summary
            (root / "built").touch()
    return path


@pytest.fixture(scope="session")
def fhir_resources(fhir_warehouse) -> dict[str, dict[str, dict]]:
    """Every resource of the FHIR view: model alias (e.g. "observation_labevents") -> id -> resource."""
    with connect(fhir_warehouse, read_only=True) as con:
        tables = [t for (t,) in con.execute("select table_name from information_schema.tables "
                                            "where table_schema = 'fhir__mimic_iv'").fetchall()]
        return {table: {i: json.loads(text) for i, text in
                        con.execute(f"select id, resource from fhir__mimic_iv.{table}").fetchall()}
                for table in tables}


def read_demo_csv(demo_dir, name: str) -> list[dict[str, str]]:
    """The rows of one gzipped CSV of a demo release as raw text, e.g. read_demo_csv(dir, "hosp/labevents.csv.gz")."""
    with gzip.open(demo_dir / name, "rt", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def demo(request) -> Path:
    """The demo build's folder: $EHRBENCH_DEMO_BUILD (a build made beforehand, to run a module alone), else the
    session's `demo_build`."""
    if os.environ.get("EHRBENCH_DEMO_BUILD"):
        return Path(os.environ["EHRBENCH_DEMO_BUILD"]).resolve()
    return request.getfixturevalue("demo_build")["folder"]


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory, demo):
    """A data directory of the module's own whose `benchmarks/` holds the demo build (linked, as `latest` too), for
    task sets and runs that must not touch the session's data directory."""
    from ehrbench.layout import DataLayout
    from ehrbench.tasksets.formats import BuildInfo

    root = tmp_path_factory.mktemp("data")
    build = BuildInfo.load(demo)
    (root / "benchmarks").mkdir()
    (root / "benchmarks" / build.build_id).symlink_to(build.folder)
    (root / "benchmarks" / "latest").symlink_to(build.build_id)
    return DataLayout(root=root)

