"""Slots of a model endpoint's global concurrency limit (one limit per endpoint, `llm-endpoint:<endpoint>`, created
by the evaluation run that calls it), held by an evaluation run — and given back by its resume when the run was killed
holding them.

A run holds its slots under a Prefect lease that a live run keeps renewing. A killed run's lease stays: a `prefect
server` reclaims it when it runs out, but the temporary server of a CLI run never does, so the resumed run used to
wait on its own dead predecessor until someone ran `prefect gcl update`. Prefect's API can neither list a limit's
leases nor find them by holder, so each run records the leases it holds in its run folder (`slot-leases/<lease id>`,
removed once released). A run resuming a run id first revokes the leases recorded there — they belong to an earlier,
dead process of that run id (one run id runs once at a time, its batches one after another) — and then waits for
slots like any run. Other run ids' leases are never touched.

A lease outlives the server process that granted it only when the server keeps leases on disk (the CLI's temporary
server does: ehrbench.cli.prefect_runs.LEASE_STORAGE): with Prefect's default in-memory storage a restarted server has
forgotten the lease, and its slots stay taken.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.concurrency.context import ConcurrencyContext
from prefect.concurrency.sync import concurrency

from ehrbench.errors import EndpointBusyError
from flows.prefect_api import announce

# Slots are leased and the lease renewed while the holder lives; a killed run's slots come back when its lease runs
# out on a `prefect server` (the shortest lease it accepts), or when the run is resumed.
SLOT_LEASE_S = 60.0
SLOT_WAIT_S = 900.0  # how long a batch waits for its endpoint's slots before the run stops and says why


def upsert_endpoint_limits(names: Iterable[str], slots: int) -> None:
    """Create the global concurrency limits named `names` with `slots` slots, or set existing ones to `slots`."""
    names = sorted(set(names))
    if names:
        with get_client(sync_client=True) as client:
            for name in names:
                client.upsert_global_concurrency_limit_by_name(name, slots)


def limit_of(name: str) -> int:
    """The slots of a global concurrency limit now (another run may have changed them)."""
    with get_client(sync_client=True) as client:
        return client.read_global_concurrency_limit_by_name(name).limit


@contextmanager
def endpoint_slots(name: str, slots: int, leases: RunLeases) -> Iterator[None]:
    """Hold `slots` of an endpoint's limit, first giving back those an interrupted run of this run id still held;
    give up after SLOT_WAIT_S with what to do about it."""
    for released in leases.release_abandoned():
        announce(f"released {released}, held by an earlier run of this run id that did not finish")
    try:
        with held_slots(name, slots, leases, lease_duration=SLOT_LEASE_S, timeout_seconds=SLOT_WAIT_S):
            yield
    except TimeoutError:
        raise EndpointBusyError(
            f"no free slots on the concurrency limit {name!r} after {SLOT_WAIT_S:.0f} s: another run is using the "
            f"endpoint, or a killed run of another run id still holds them (resuming that run id gives them back; a "
            f"`prefect server` also reclaims them {SLOT_LEASE_S:.0f} s after the kill). As a last resort free them "
            f"with `prefect gcl update {name} --active-slots 0` and re-run with the same run id.") from None


class RunLeases:
    """The leases a run holds, one file each under its run folder."""

    def __init__(self, run_folder: Path) -> None:
        self.folder = Path(run_folder) / "slot-leases"

    def recorded(self) -> list[UUID]:
        if not self.folder.is_dir():
            return []
        return [UUID(path.name) for path in sorted(self.folder.iterdir()) if _is_uuid(path.name)]

    def remember(self, lease_id: UUID, limit: str, slots: int) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        holder = {"limit": limit, "slots": slots, "pid": os.getpid(),
                  "acquired_at": datetime.now(UTC).isoformat(timespec="seconds")}
        (self.folder / str(lease_id)).write_text(json.dumps(holder))  # for a person; only the name is read back

    def forget(self, lease_id: UUID) -> None:
        (self.folder / str(lease_id)).unlink(missing_ok=True)

    def describe(self, lease_id: UUID) -> str:
        try:
            holder = json.loads((self.folder / str(lease_id)).read_text())
            return (f"{holder['slots']} slot(s) of {holder['limit']} (pid {holder['pid']}, "
                    f"since {holder['acquired_at']})")
        except (OSError, ValueError, KeyError, TypeError):
            return f"lease {lease_id}"

    def release_abandoned(self) -> list[str]:
        """Revoke every recorded lease (the server frees its slots; an expired or unknown lease is a no-op) and
        forget it; what was released, described."""
        released = []
        leases = self.recorded()
        if leases:
            with get_client(sync_client=True) as client:
                for lease_id in leases:
                    client.release_concurrency_slots_with_lease(lease_id=lease_id)
                    released.append(self.describe(lease_id))
                    self.forget(lease_id)
        return released


@contextmanager
def held_slots(limit: str, slots: int, leases: RunLeases, *, lease_duration: float,
               timeout_seconds: float) -> Iterator[None]:
    """Hold `slots` of `limit` with a renewed lease recorded in `leases` until the block ends. TimeoutError when they
    are not free within `timeout_seconds`."""
    granted: list[UUID] = []
    try:
        # Our own ConcurrencyContext: Prefect records a lease in the current one the moment it is granted (to release
        # it should the holder be cancelled), which is how the lease id can be known here.
        with ConcurrencyContext() as context, concurrency(
                limit, occupy=slots, strict=True, lease_duration=lease_duration, timeout_seconds=timeout_seconds):
            granted = list(context.cleanup_lease_ids)
            if not granted:
                logging.getLogger(__name__).warning(
                    "Prefect did not report the lease of %s; should this run be killed, its resume waits for the "
                    "lease to run out", limit)
            for lease_id in granted:
                leases.remember(lease_id, limit, slots)
            yield
    finally:  # released by now (or left to expire when the release itself failed)
        for lease_id in granted:
            leases.forget(lease_id)


def _is_uuid(name: str) -> bool:
    try:
        UUID(name)
    except ValueError:
        return False
    return True
