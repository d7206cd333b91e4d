"""The temporary Prefect server of a CLI command that runs a flow with no configured API.

Prefect's client would start the same server itself (prefect.server.api.server.SubprocessASGIServer, the same
uvicorn command and environment), but only once the flow runs, and importing that module costs the CLI's process ~3 s
of CPU (the server's whole application) before the server process even starts. Started here as the command starts,
the server comes up (~4 s) while the command imports its flow.
"""

from __future__ import annotations

import atexit
import random
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path

from ehrbench.errors import EhrbenchError

PORTS = range(8000, 9000)  # Prefect's range for its temporary servers
PORT_IN_USE_EXIT_CODE = 3  # uvicorn's exit code when its port was taken meanwhile
# What Prefect sets for the temporary server it starts itself: no UI, and the server knows it is temporary.
TEMPORARY_SERVER_ENVIRONMENT = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
                                "PREFECT__SERVER_FINAL": "1"}
# Unless the user's environment says otherwise, the server does not register Prefect's block types as it starts (nor
# hash the block registry to find out whether it must): the CLI waits ~1 s less for it (3.7 -> 2.7 s to answer). A
# command's flows load no block it did not save, and saving a block registers its type.
UNLESS_SET = {"PREFECT_API_BLOCKS_REGISTER_ON_START": "false", "PREFECT_MEMOIZE_BLOCK_AUTO_REGISTRATION": "false"}


class ServerDidNotStart(EhrbenchError):
    """The temporary server did not answer in time, or exited."""


class TemporaryServer:
    """A Prefect API server in a child process on a free local port, stopped when this process exits."""

    def __init__(self, environment: Mapping[str, str], prefect_package: Path) -> None:
        self._environment = {**UNLESS_SET, **environment, **TEMPORARY_SERVER_ENVIRONMENT}
        self._prefect_package = prefect_package
        self.port = _free_port()
        self._process = self._run()
        atexit.register(self.stop)  # after Prefect's exit handlers have sent the flows' last logs and events

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def wait_until_ready(self, timeout_s: float) -> None:
        """Return once the server answers its health check; raise ServerDidNotStart after `timeout_s`."""
        import httpx

        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=5) as client:
            while True:
                if self._process.poll() == PORT_IN_USE_EXIT_CODE:
                    self.port = _free_port()
                    self._process = self._run()
                elif self._process.poll() is not None:
                    raise ServerDidNotStart(f"the temporary Prefect server exited with code {self._process.returncode}")
                try:
                    if client.get(f"{self.api_url}/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() >= deadline:
                    raise ServerDidNotStart(f"the temporary Prefect server did not start within {timeout_s:g} s "
                                            "(machine busy?); start a server with 'make server', or retry")
                time.sleep(0.1)

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()

    def _run(self) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", str(self._prefect_package), "--factory",
             "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(self.port),
             "--log-level", "error", "--lifespan", "on"],
            env=self._environment)


def _free_port() -> int:
    """A random port of Prefect's range that nothing listens on now (the server may still lose it: see
    PORT_IN_USE_EXIT_CODE)."""
    for _ in range(50):
        port = random.choice(PORTS)  # noqa: S311 — a port, not a secret
        with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise ServerDidNotStart(f"no free local port in {PORTS.start}-{PORTS.stop - 1} for the temporary Prefect server")

