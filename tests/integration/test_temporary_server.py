"""The CLI's temporary Prefect server (ehrbench.stack.temporary_server): a real server process."""

import os
import socket

import httpx
import prefect
import pytest

from ehrbench.environment import environment as ehrbench_environment
from ehrbench.stack import temporary_server
from ehrbench.stack.prefect_database import seed_database
from ehrbench.stack.temporary_server import TemporaryServer

pytestmark = pytest.mark.integration


def test_a_port_taken_before_the_server_binds_it_moves_the_server_to_another(tmp_path, monkeypatch):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    free_ports = iter([taken.getsockname()[1], *temporary_server.PORTS])
    monkeypatch.setattr(temporary_server, "_free_port", lambda: next(free_ports))
    environment = {**os.environ, "PREFECT_HOME": str(tmp_path), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                   "DO_NOT_TRACK": "1"}
    server = TemporaryServer(environment, prefect.__module_path__.parent)
    try:
        server.wait_until_ready(180)
        assert server.port != taken.getsockname()[1]
        assert httpx.get(f"{server.api_url}/health", timeout=10).status_code == 200
    finally:
        server.stop()
        taken.close()
    assert server._process.poll() is not None  # stopped


def _block_types(environment: dict, tmp_path) -> list[str]:
    """The block types a new server's database has once the server answers (the database seeded as the CLI seeds
    it: migrated, empty)."""
    tmp_path.mkdir(parents=True)
    seed_database(tmp_path / "prefect.db", ehrbench_environment().user_cache_dir())
    server = TemporaryServer({**os.environ, "PREFECT_HOME": str(tmp_path), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                              "DO_NOT_TRACK": "1", **environment}, prefect.__module_path__.parent)
    try:
        server.wait_until_ready(180)
        answer = httpx.post(f"{server.api_url}/block_types/filter", json={}, timeout=30)
        answer.raise_for_status()
        return [block_type["slug"] for block_type in answer.json()]
    finally:
        server.stop()


def test_the_server_registers_no_block_types_as_it_starts_unless_the_user_says_so(tmp_path):
    assert _block_types({}, tmp_path / "default") == []  # ~1 s less for the CLI to wait
    assert "secret" in _block_types({"PREFECT_API_BLOCKS_REGISTER_ON_START": "true",
                                     "PREFECT_MEMOIZE_BLOCK_AUTO_REGISTRATION": "true"}, tmp_path / "asked")
