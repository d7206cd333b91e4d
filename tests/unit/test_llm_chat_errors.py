"""Failures of the Gemini chat client reach callers as ChatError naming the model, whatever layer raised them
(a timeout, a dropped connection, a reply that is not JSON)."""

from __future__ import annotations

import json

import httpx
import pytest

from ehrbench.llm.chat import ChatError, GeminiChat, httpx_errors


@pytest.mark.parametrize(("raised", "expected"), [
    (httpx.ReadTimeout("read timed out"), r"gemini:gemini-x: timed out after 0\.5 s"),
    (httpx.ConnectError("connection refused"), r"gemini:gemini-x: ConnectError"),
    (json.JSONDecodeError("Expecting value", "<html>\n<h1>502</h1></html>", 0),  # a proxy's page, read as JSON
     r"gemini:gemini-x: unreadable reply: the reply is not valid JSON \(Expecting value at position 0\): "
     r"'<html> <h1>502</h1></html>'"),
])
def test_a_timeout_or_a_dropped_connection_is_a_chat_error(raised, expected):
    chat = GeminiChat("gemini-x", api_key="not-used", timeout_s=0.5, max_retries=0)

    def fail(**_):
        raise raised

    chat._client.models.generate_content = fail  # the transport fails before any HTTP answer
    with pytest.raises(ChatError, match=expected):
        chat.complete([{"role": "user", "content": "hi"}], temperature=0.0)


def test_the_error_classes_come_from_every_installed_httpx_flavour():
    timeouts = httpx_errors("TimeoutException")
    assert httpx.TimeoutException in timeouts
    assert all(issubclass(cls, Exception) for cls in timeouts)
    assert httpx_errors("NoSuchError") == ()
