"""The CLI's temporary Prefect server (ehrbench.stack.temporary_server): a real server process."""

import os
import socket

import httpx
import prefect
import pytest

from ehrbench.stack import temporary_server
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
