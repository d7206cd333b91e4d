"""Running a flow from the command line: Prefect's environment (set before it is imported), a configured API
that must answer, and a flow's failure as one line."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from ehrbench.cli.checks import EXIT_FAILED, fail, first_line
from ehrbench.environment import environment
from ehrbench.errors import EhrbenchError
from ehrbench.garbage_collection import tune_for_a_long_run
from ehrbench.stack.prefect_database import seed_database, sqlite_file
from ehrbench.stack.prefect_server import use_server_settings
from ehrbench.stack.temporary_server import TemporaryServer

# Prefect gives its temporary server 20 s to come up; a nightly build beside a test run needed more.
EPHEMERAL_STARTUP_TIMEOUT_S = 120
# Concurrency leases on disk (PREFECT_HOME/concurrency_leases) instead of the server's memory: the lease of a killed
# evaluation outlives its temporary server, so the resumed run can revoke it (flows/endpoint_slots.py).
LEASE_STORAGE = "prefect.server.concurrency.lease_storage.filesystem"


def use_prefect(root: Path, *, verbose: bool = False) -> None:
    """Prefect's environment; called once the input is checked, before Prefect is imported (it reads its settings
    then). Unless `verbose`, Prefect's console output — every log line of every run — is off: the terminal shows the
    flows' progress instead (`following_flows`); the lines stay in the run's logs and the build's build.log.
    The process's garbage collector is set for a long run (ehrbench.garbage_collection)."""
    tune_for_a_long_run()
    # Without a configured Prefect API, flows run against a temporary local server whose database
    # belongs under the data directory, not the user's home.
    os.environ.setdefault("PREFECT_HOME", str(root / "prefect"))
    Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", str(EPHEMERAL_STARTUP_TIMEOUT_S))
    os.environ.setdefault("PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE", LEASE_STORAGE)
    # No telemetry unless the user asks for it (the temporary server would otherwise announce and send it).
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # A busy API: Prefect's client retries 429/502/503 (+504) 8 times with backoff (~8 min) instead of 5 (~1 min).
    os.environ.setdefault("PREFECT_CLIENT_MAX_RETRIES", "8")
    os.environ.setdefault("PREFECT_CLIENT_RETRY_EXTRA_CODES", "504")
    use_server_settings()  # the temporary server's (ehrbench.stack.prefect_server)
    if not verbose:
        os.environ["PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"] = "CRITICAL"


@contextmanager
def following_flows(verbose: bool) -> Iterator[None]:
    """The flows' progress on stderr: a line per stage, their warnings, a bar of trials (Prefect's own lines when
    `verbose`)."""
    if verbose:
        yield
        return
    from rich.console import Console

    from ehrbench.progress import terminal_progress

    with terminal_progress(Console(stderr=True)):
        yield


@contextmanager
def flow_failures(*reported: type[Exception]) -> Iterator[None]:
    """A flow's failure as one line and exit 1: our own errors (a temporary Prefect server that did not come up is
    one), and `reported`."""
    try:
        yield
    except (EhrbenchError, *reported) as exc:
        fail(first_line(exc), EXIT_FAILED)


@contextmanager
def prefect_api() -> Iterator[Callable[[], None]]:
    """A configured but dead Prefect API (say, `make server` not stopped before a reboot) fails fast. Without one,
    the temporary server's database starts as a copy of a migrated one (ehrbench.stack.prefect_database) and the
    server itself starts now (ehrbench.stack.temporary_server), while the caller imports its flow; once it answers,
    Prefect's client and this process's children use it.

    Yields the call that waits until the API is ready (raising ServerDidNotStart); make it before running a flow."""
    import httpx
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    settings = get_current_settings()
    url = settings.api.url
    if url:
        try:
            httpx.get(f"{url.rstrip('/')}/health", timeout=5).raise_for_status()
        except httpx.HTTPError as exc:
            raise EhrbenchError(f"the Prefect API at {url} does not answer ({type(exc).__name__}); start it with "
                                "'make server', or run 'make stop' to go back to a temporary server") from None
        yield _ready
        return
    database = sqlite_file(settings.server.database.connection_url.get_secret_value())
    if database is not None:
        seed_database(database, environment().user_cache_dir())
    import prefect

    server = TemporaryServer({**os.environ, **settings.to_environment_variables(exclude_unset=True)},
                             prefect.__module_path__.parent)
    with ExitStack() as api_settings:

        def wait_until_ready() -> None:  # its port is known once it answers (it may have had to take another)
            server.wait_until_ready(settings.server.ephemeral.startup_timeout_seconds)
            api_settings.enter_context(_process_wide_api_url(server.api_url))
            api_settings.enter_context(temporary_settings({PREFECT_API_URL: server.api_url}))

        yield wait_until_ready


@contextmanager
def _process_wide_api_url(api_url: str) -> Iterator[None]:
    """`api_url` for the flow's child processes (they read their settings anew) and for every thread of this one,
    restored afterwards. A thread that Prefect starts itself has no copy of the caller's settings context: the
    process pool's message forwarder, which sends the stage workers' events and logs on, would otherwise find no API
    and start a second temporary server of its own (~4 s of CPU, plus ~3 s here to import the server's app)."""
    from prefect.context import refresh_global_settings_context

    previous = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = api_url
    refresh_global_settings_context()
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = previous
        refresh_global_settings_context()


def _ready() -> None:
    """An API that needs no waiting for."""
