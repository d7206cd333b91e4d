"""Failures of the Gemini chat client reach callers as ChatError naming the model, whatever layer raised them."""

from __future__ import annotations

import httpx
import pytest

from ehrbench.llm.chat import ChatError, GeminiChat, httpx_errors


@pytest.mark.parametrize(("raised", "expected"), [
    (httpx.ReadTimeout("read timed out"), r"gemini:gemini-x: timed out after 0\.5 s"),
    (httpx.ConnectError("connection refused"), r"gemini:gemini-x: ConnectError"),
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
