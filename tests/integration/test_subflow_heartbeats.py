"""Subflows started inside `subflows_without_heartbeats` (the build's stages, the evaluation's dashboard) send no
heartbeats of their own: the setting Prefect's flow engine reads as a subflow starts is unset there, on a real Prefect
server, and the calling flow's own setting is left as it was."""

from __future__ import annotations

import pytest
from prefect import flow
from prefect.settings import get_current_settings

from flows.prefect_api import subflows_without_heartbeats

pytestmark = pytest.mark.integration


@flow(name="toy-heartbeat-child")
def child() -> int | None:
    return get_current_settings().flows.heartbeat_frequency  # what the engine read to start (or not) a heartbeat


@flow(name="toy-heartbeat-parent")
def parent() -> tuple[int | None, int | None, int | None]:
    own = get_current_settings().flows.heartbeat_frequency
    with subflows_without_heartbeats():
        quiet = child()
    return own, quiet, child()


def test_subflows_inside_send_no_heartbeats_and_the_parent_keeps_its_own(prefect_api_url):
    own, quiet, after = parent()
    assert own is not None and own >= 30  # Prefect's default (180 s), a heartbeat per flow run
    assert quiet is None
    assert after == own
