"""Shared fixtures. The open demo datasets are read from ../shared/data (never copied into the repo);
tests that need them skip with a message when that folder is absent."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("EHRBENCH_SHARED_DATA", REPO.parent / "shared" / "data"))
EHRSQL_2024 = SHARED_DATA / "ehrsql-2024" / "mimic_iv"  # the published valid split

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
# Never use the checkout's data/prefect (named in .env) or ~/.prefect from tests.
os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="ehrbench-prefect-home-")
os.environ["PREFECT_PROFILES_PATH"] = os.path.join(os.environ["PREFECT_HOME"], "profiles.toml")
os.environ.pop("PREFECT_API_URL", None)
# Nor the user's ~/.cache/ehrbench: one cache folder for the session, shared by the xdist workers (they inherit the
# controller's environment), so dbt's parse is done once per set of vars, not once per test's work folder.
os.environ.setdefault("EHRBENCH_CACHE_DIR", tempfile.mkdtemp(prefix="ehrbench-cache-"))


def _demo_dir(name: str) -> Path:
    path = SHARED_DATA / name
    if not path.is_dir():
        pytest.skip(f"demo data not found at {path} (set EHRBENCH_SHARED_DATA to the folder holding {name})")
    return path


@pytest.fixture(scope="session")
def mimic_demo_dir() -> Path:
    return _demo_dir("mimic-iv-demo-2.2")


@pytest.fixture(scope="session")
def eicu_demo_dir() -> Path:
    return _demo_dir("eicu-demo-2.0.1")


def mimic_fhir_id(namespace: str, key: object) -> str:
    """MIMIC-IV on FHIR's resource id written out by hand (docs/benchmarks.md#fhir-resource-ids), to check the code
    independently:
    uuid5(uuid5(uuid5(NAMESPACE_OID, "MIMIC-IV"), <namespace>), <key>)."""
    import uuid

    return str(uuid.uuid5(uuid.uuid5(uuid.uuid5(uuid.NAMESPACE_OID, "MIMIC-IV"), namespace), str(key)))


# The files that take longest (measured on 2 cores), in the order `make test` should start them: pytest-xdist
# (--dist loadfile --no-loadscope-reorder) hands files to its workers in collection order, so the demo build starts
# at once on one worker while the other works through long files until the build is there for the deployment test.
LONG_FILES_FIRST = (
    "tests/integration/test_build_cli.py",  # builds the session's demo (~5 min), then works in it
    "tests/integration/test_ehrsql_eicu_profile.py",
    "tests/integration/test_renamed_profiles.py",
    "tests/integration/test_ehrchatqa_eicu.py",
    "tests/integration/test_ehrsql2024_reproduction.py",
    "tests/integration/test_fhir_observations.py",
    "tests/integration/test_prefect_deployment.py",  # builds again in a copy of the demo build (~8 min)
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONG_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest keep order
