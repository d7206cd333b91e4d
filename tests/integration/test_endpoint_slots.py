"""A resumed evaluation gives back the endpoint slots its killed predecessor (same run id) still held, instead of
waiting for them — on a real Prefect server, with the lease storage the CLI's temporary server uses — and leaves the
slots of a live run with another run id alone."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ehrbench.cli.prefect_runs import LEASE_STORAGE

pytestmark = pytest.mark.integration

LIMIT = "llm-endpoint:test-endpoint"
SLOTS = 2  # per run; the limit has 2 runs' worth

# A run that takes its batch's slots the way flows/trial_batches.py does, then is killed while holding them.
HOLD_SLOTS = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from flows.endpoint_slots import RunLeases, held_slots
    with held_slots(sys.argv[1], int(sys.argv[2]), RunLeases(Path(sys.argv[3])), lease_duration=60,
                    timeout_seconds=30):
        print("ready", flush=True)
        time.sleep(600)
""")


@pytest.fixture(scope="module")
def prefect_api_url():
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with temporary_settings({PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE: LEASE_STORAGE}), \
            prefect_test_harness(server_startup_timeout=180):
        yield PREFECT_API_URL.value()


@pytest.fixture
def limit(prefect_api_url):
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(LIMIT, 2 * SLOTS)
    yield LIMIT
    with get_client(sync_client=True) as client:
        client.delete_global_concurrency_limit_by_name(LIMIT)


def _active_slots() -> int:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_global_concurrency_limit_by_name(LIMIT).active_slots


def _killed_holder(api_url: str, run_folder) -> None:
    """A run that took SLOTS slots in another process and was killed (SIGKILL) holding them."""
    import os

    env = {**os.environ, "PREFECT_API_URL": api_url}
    proc = subprocess.Popen([sys.executable, "-c", HOLD_SLOTS, LIMIT, str(SLOTS), str(run_folder)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def test_a_resumed_run_releases_its_dead_predecessors_slots_but_not_another_runs(prefect_api_url, limit, tmp_path,
                                                                                  monkeypatch):
    from flows.endpoint_slots import RunLeases, endpoint_slots, held_slots

    killed_run, other_run = tmp_path / "run_id=killed", tmp_path / "run_id=other"
    _killed_holder(prefect_api_url, killed_run)
    assert len(RunLeases(killed_run).recorded()) == 1  # the dead process recorded its lease
    assert _active_slots() == SLOTS

    with held_slots(LIMIT, SLOTS, RunLeases(other_run), lease_duration=60, timeout_seconds=30):  # a live run
        assert _active_slots() == 2 * SLOTS  # the limit is full: without the release the resume would wait
        other_leases = RunLeases(other_run).recorded()
        monkeypatch.setattr("flows.endpoint_slots.SLOT_WAIT_S", 30.0)
        started = time.monotonic()
        with endpoint_slots(LIMIT, SLOTS, RunLeases(killed_run)):
            waited = time.monotonic() - started
            assert _active_slots() == 2 * SLOTS  # the live run's slots plus the resumed run's own
            resumed_leases = RunLeases(killed_run).recorded()
            assert len(resumed_leases) == 1
            # the other run's slots were not taken: a third run finds the limit full
            with pytest.raises(TimeoutError), held_slots(LIMIT, 1, RunLeases(tmp_path / "run_id=third"),
                                                         lease_duration=60, timeout_seconds=3):
                pytest.fail("acquired a slot of a full limit")
        assert waited < 20, f"the resume waited {waited:.0f} s: for the lease to run out, not released"
        assert RunLeases(other_run).recorded() == other_leases  # still recorded and held
        assert RunLeases(killed_run).recorded() == []  # released on exit, forgotten
        assert _active_slots() == SLOTS
    assert _active_slots() == 0
    assert RunLeases(other_run).recorded() == []
