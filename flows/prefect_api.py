"""How the flows talk to Prefect: calls to its API that may fail for a while without the pipeline's work being
wrong, and the progress lines a person follows a run by.

A busy server answers 502/503/504 ("database is locked" on SQLite) or drops connections. Prefect's client already
retries each request (PREFECT_CLIENT_MAX_RETRIES, raised by the Makefile, the CLI and prefect.yaml); on top of that,
the stages retry what they can safely repeat — artifact writes and the dashboard stage, which renders into a temporary
folder and swaps it in — with backoff. An artifact is a view of the work: one that still cannot be written is a
warning, never a failed build or evaluation. Artifact writes also wait out a 500: repeating one at worst adds a version
of its key, and the server on PostgreSQL was seen to answer 500 to one while a nightly's 2,000 task runs were settling
(its traceback stays in the server's log).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import httpx
from prefect import get_run_logger
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, get_current_settings, temporary_settings
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from ehrbench.progress import ANNOUNCED, PROGRESS
from ehrbench.transform import DbtRun

TRANSIENT_STATUS = frozenset({502, 503, 504})
ATTEMPTS = 5
FIRST_DELAY_S, MAX_DELAY_S = 2.0, 60.0

T = TypeVar("T")


def is_transient_api_error(exc: BaseException) -> bool:
    """A server that is busy or restarting, anywhere in the exception's chain: 502/503/504, SQLite's "database is
    locked", a dropped or refused connection, a timeout."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, httpx.HTTPStatusError) and current.response.status_code in TRANSIENT_STATUS:
            return True
        if isinstance(current, httpx.TransportError | ConnectionError):
            return True
        if "database is locked" in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def is_server_error(exc: BaseException) -> bool:
    """A transient failure, or any 5xx answer: the server failed, not the request."""
    return is_transient_api_error(exc) or (
        isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code >= 500)


def with_api_retries(call: Callable[..., T], *args, what: str,
                     retry_on: Callable[[BaseException], bool] = is_transient_api_error, **kwargs) -> T:
    """`call(*args, **kwargs)`, repeated with exponential backoff (and jitter) while it fails with an error `retry_on`
    accepts (by default a transient one): ATTEMPTS calls, FIRST_DELAY_S doubling up to MAX_DELAY_S between them."""
    attempts = ATTEMPTS
    def log_retry(state: RetryCallState) -> None:
        _logger().warning("%s: the Prefect API failed (%s); attempt %d of %d in %.0f s", what,
                          _one_line(state.outcome.exception()), state.attempt_number + 1, attempts,
                          state.next_action.sleep if state.next_action else 0)

    retrying = Retrying(retry=retry_if_exception(retry_on), stop=stop_after_attempt(attempts),
                        wait=wait_exponential_jitter(initial=FIRST_DELAY_S, max=MAX_DELAY_S), reraise=True,
                        before_sleep=log_retry)
    return retrying(call, *args, **kwargs)


def markdown_artifact(key: str, markdown: str, description: str) -> None:
    _artifact(create_markdown_artifact, key=key, markdown=markdown, description=description)


def table_artifact(key: str, table: list[dict], description: str) -> None:
    _artifact(create_table_artifact, key=key, table=table, description=description)


def link_artifact(key: str, link: str, link_text: str, description: str) -> None:
    _artifact(create_link_artifact, key=key, link=link, link_text=link_text, description=description)


def log_dbt_run(run: DbtRun, log_dir: Path) -> None:
    """A dbt run in one line (its node-by-node log is on disk) and one line per node that warned."""
    logger = _logger()
    logger.info("%s; log: %s", run.describe(), log_dir / "dbt.log")
    for warning in run.warnings():
        logger.warning(warning)


def artifact_url(key: str) -> str:
    """The UI page of an artifact key's latest version (the key itself when no UI is configured)."""
    ui = get_current_settings().ui_url
    return f"{ui}/artifacts/key/{key}" if ui else key


def _artifact(create: Callable[..., object], *, key: str, **fields) -> None:
    try:
        with_api_retries(create, key=key, what=f"artifact {key}", retry_on=is_server_error, **fields)
    except Exception as exc:
        if not is_server_error(exc):
            raise
        _logger().warning("artifact %s was not written: the Prefect API kept failing (%s)", key, _one_line(exc))


@contextmanager
def subflows_without_heartbeats() -> Iterator[None]:
    """The subflows started inside send no heartbeats of their own; the calling flow's heartbeat (started before,
    with the settings of then) goes on telling the server that the run is alive. As a flow run ends, Prefect joins
    its heartbeat thread, which sleeps in whole seconds: each subflow's end waited up to a second, ~1 s per short
    subflow and ~7 s of a demo build's 13."""
    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


def announce(message: str, *, level: int = logging.INFO) -> None:
    """A progress line: into the run's logs (UI, `prefect deployment run --watch`, the worker's log) and to a
    terminal that follows the run (the CLI's)."""
    _logger().log(level, message, extra={ANNOUNCED: True})  # the terminal shows the PROGRESS copy
    PROGRESS.log(level, message)


def _logger() -> logging.Logger | logging.LoggerAdapter:
    try:
        return get_run_logger()
    except Exception:  # outside a run (a unit test calling the helpers directly)
        return logging.getLogger(__name__)


def _one_line(exc: BaseException | None) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
