"""Which Prefect API failures are waited out, how often, and what an artifact that cannot be written does."""

from __future__ import annotations

import logging
import sqlite3

import httpx
import pytest

import flows.prefect_api as prefect_api
from flows.prefect_api import _artifact, is_server_error, is_transient_api_error, with_api_retries

API = "http://127.0.0.1:4200/api/flow_runs/"


def status_error(code: int, text: str = "") -> httpx.HTTPStatusError:
    request = httpx.Request("POST", API)
    return httpx.HTTPStatusError(f"Server error '{code}' for url '{API}'\n{text}", request=request,
                                 response=httpx.Response(code, request=request, text=text))


def chained(outer: Exception, cause: BaseException) -> Exception:
    try:
        raise outer from cause
    except Exception as exc:
        return exc


@pytest.mark.parametrize(("exc", "transient"), [
    (status_error(503, "database is locked"), True),
    (status_error(502), True),
    (status_error(504), True),
    (httpx.ReadError("connection reset by peer"), True),
    (httpx.ConnectError("connection refused"), True),
    (ConnectionResetError(104, "Connection reset by peer"), True),
    (chained(RuntimeError("flow run could not be created"), sqlite3.OperationalError("database is locked")), True),
    (status_error(400), False),
    (status_error(404), False),
    (status_error(500, "internal error"), False),
    (ValueError("an agent spec is wrong"), False),
])
def test_transient_api_errors_are_told_from_real_ones(exc, transient):
    assert is_transient_api_error(exc) is transient


@pytest.fixture
def no_waiting(monkeypatch):
    monkeypatch.setattr(prefect_api, "FIRST_DELAY_S", 0.0)
    monkeypatch.setattr(prefect_api, "MAX_DELAY_S", 0.0)
    monkeypatch.setattr(prefect_api, "ATTEMPTS", 4)


class Flaky:
    """Fails with `errors` in turn, then returns "done"."""

    def __init__(self, *errors: BaseException):
        self.errors, self.calls = list(errors), 0

    def __call__(self, **kwargs):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def test_a_transient_failure_is_retried_until_the_call_succeeds(no_waiting):
    call = Flaky(status_error(503, "database is locked"), httpx.ReadError("reset"))
    assert with_api_retries(call, what="test") == "done"
    assert call.calls == 3


def test_retries_stop_after_the_attempts_and_raise_the_last_error(no_waiting):
    call = Flaky(*[status_error(503)] * 10)
    with pytest.raises(httpx.HTTPStatusError):
        with_api_retries(call, what="test")
    assert call.calls == 4


def test_a_real_error_is_raised_at_once(no_waiting):
    call = Flaky(ValueError("bad"))
    with pytest.raises(ValueError, match="bad"):
        with_api_retries(call, what="test")
    assert call.calls == 1


def test_an_artifact_the_api_never_takes_is_a_warning_not_a_failure(no_waiting, caplog):
    call = Flaky(*[status_error(503, "database is locked")] * 10)
    with caplog.at_level(logging.WARNING):
        _artifact(call, key="questions", markdown="# x")
    assert call.calls == 4
    assert "artifact questions was not written" in caplog.text


def test_an_artifact_write_waits_out_a_server_error(no_waiting):
    """A 500 is no transient error for other calls (a run-creating POST is not repeated), but an artifact write is
    safe to repeat."""
    assert not is_transient_api_error(status_error(500)) and is_server_error(status_error(500))
    call = Flaky(status_error(500, "internal error"), status_error(500, "internal error"))
    _artifact(call, key="evaluation-metrics", table=[{"a": 1}])
    assert call.calls == 3
    other = Flaky(status_error(500, "internal error"))
    with pytest.raises(httpx.HTTPStatusError):
        with_api_retries(other, what="create a flow run")
    assert other.calls == 1


def test_an_artifact_the_server_keeps_failing_is_a_warning(no_waiting, caplog):
    call = Flaky(*[status_error(500, "internal error")] * 10)
    with caplog.at_level(logging.WARNING):
        _artifact(call, key="evaluation-metrics", table=[{"a": 1}])
    assert call.calls == 4 and "artifact evaluation-metrics was not written" in caplog.text


def test_an_artifact_refused_for_a_real_reason_still_fails(no_waiting):
    with pytest.raises(httpx.HTTPStatusError):
        _artifact(Flaky(status_error(422)), key="bad key", markdown="# x")
