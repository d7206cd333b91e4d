"""Tool calling through chat completions on any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server).

An endpoint that still fails after the SDK's own retries (429, 5xx, timeouts) raises `ChatError`, naming the model and
the endpoint's words; a body that is not a chat completion is an unreadable reply, also a `ChatError`.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ehrbench.llm.chat import ChatError, OpenAIEndpoint, message_text, openai_sdk, read_reply, unreadable_reply
from ehrbench.llm.tool_chat import ChatTurn, ToolCall, ToolSpec, Usage, parse_tool_call


class OpenAIToolChat(OpenAIEndpoint):
    """Tool calling through chat completions on any OpenAI-compatible endpoint (SDK retries: see chat._client)."""

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None, timeout_s: float = 60.0,
                 max_retries: int = 4):
        super().__init__(model, base_url=base_url, api_key=api_key, timeout_s=timeout_s, max_retries=max_retries)
        self.timeout_s = timeout_s

    def chat(self, messages: list[dict], tools: list[ToolSpec], *, temperature: float = 0.0,
             max_tokens: int | None = None) -> ChatTurn:
        # tools and max_tokens are left out when unset: a few compatible servers reject empty or null values
        extra: dict[str, Any] = {"tools": [tool.openai() for tool in tools]} if tools else {}
        if max_tokens is not None:
            extra["max_tokens"] = max_tokens
        openai = openai_sdk()
        start = time.perf_counter()
        try:
            response = self._client.chat.completions.create(model=self.model, messages=messages,
                                                            temperature=temperature, **extra)
        except openai.APITimeoutError as exc:
            raise ChatError(f"{self._name()}: timed out after {self.timeout_s} s on every attempt: {exc}") from exc
        except openai.OpenAIError as exc:
            raise ChatError(f"{self._name()}: {exc}") from exc
        except json.JSONDecodeError as exc:
            raise unreadable_reply(self._name(), None, exc) from exc
        latency = time.perf_counter() - start
        return read_reply(self._name(), response, lambda reply: _openai_turn(reply, tools, latency))


def _openai_turn(response: Any, tools: list[ToolSpec], latency_s: float) -> ChatTurn:
    if not response.choices:
        raise ValueError("it holds no choices")
    choice = min(response.choices, key=lambda c: c.index)
    calls = [_openai_call(raw, index, tools) for index, raw in enumerate(choice.message.tool_calls or [])]
    usage = response.usage
    return ChatTurn(text=message_text(choice.message), tool_calls=calls,
                    usage=Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0) if usage else Usage(),
                    finish_reason=choice.finish_reason, latency_s=latency_s)


def _openai_call(raw: Any, index: int, tools: list[ToolSpec]) -> ToolCall:
    function = getattr(raw, "function", None)
    if function is None:  # a custom (free-text) tool call: not something we offered
        custom = getattr(raw, "custom", None)
        name, arguments = getattr(custom, "name", "?"), getattr(custom, "input", "")
    else:
        name, arguments = function.name or "", function.arguments
    return parse_tool_call(raw.id or f"call_{index}", name, arguments, tools)
