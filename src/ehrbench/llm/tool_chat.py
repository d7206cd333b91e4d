"""The provider-neutral interface of tool (function) calling, for ReAct-style agents: the tools a model is offered
(`ToolSpec`), the calls it makes (`ToolCall`), one reply (`ChatTurn`) with its token counts (`Usage`), and the
`ToolChatModel` protocol the provider adapters implement (openai_tools, gemini_tools; `tools.tool_chat_model` picks
one by spec).

Messages use OpenAI's chat format: roles system, user, assistant (optionally with `tool_calls`) and tool (with
`tool_call_id`); `assistant_message` and `tool_result_message` build the last two from a `ChatTurn`. A model's bad
tool call (arguments that are not a JSON object, an unknown tool, a missing required argument) never raises:
`parse_tool_call` returns it with `error` set, for the agent loop to answer the model with and to count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

# How Google's own OpenAI-compatible endpoint carries a Gemini thought signature inside an OpenAI tool call; Gemini
# wants it sent back with the call, so the OpenAI-format history keeps it in the same place (gemini_tools reads it).
THOUGHT_SIGNATURE_KEY = ("extra_content", "google", "thought_signature")


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call; `parameters` is the JSON schema of its arguments object."""

    name: str
    description: str
    parameters: dict = field(default_factory=lambda: {"type": "object", "properties": {}})

    def openai(self) -> dict:
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for. When `error` is set the call must not run: answer the model with the error
    (it says what was wrong) and count it. `raw_arguments` is the arguments text exactly as the model wrote it."""

    id: str
    name: str
    arguments: dict | None
    raw_arguments: str
    error: str | None = None
    # Gemini's opaque thought signature (base64), sent back with the call in the next request; None elsewhere.
    signature: str | None = None


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)


@dataclass(frozen=True)
class ChatTurn:
    """One model reply. `latency_s` is wall time of the whole call, retries included."""

    text: str | None
    tool_calls: list[ToolCall]
    usage: Usage
    finish_reason: str | None
    latency_s: float

    @property
    def tool_errors(self) -> int:
        return sum(call.error is not None for call in self.tool_calls)


class ToolChatModel(Protocol):
    provider: str
    model: str

    def chat(self, messages: list[dict], tools: list[ToolSpec], *, temperature: float = 0.0,
             max_tokens: int | None = None) -> ChatTurn:
        """The model's next turn: text, tool calls or both. `messages` are in OpenAI's chat format."""
        ...


def assistant_message(turn: ChatTurn) -> dict:
    """The OpenAI-format assistant message recording `turn`, to append to the history before the tool results."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.text}
    if turn.tool_calls:
        message["tool_calls"] = [_openai_tool_call(call) for call in turn.tool_calls]
    return message


def tool_result_message(call: ToolCall, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call.id, "content": content}


def _openai_tool_call(call: ToolCall) -> dict:
    entry: dict[str, Any] = {"id": call.id, "type": "function",
                             "function": {"name": call.name, "arguments": call.raw_arguments}}
    if call.signature:
        outer, provider, key = THOUGHT_SIGNATURE_KEY
        entry[outer] = {provider: {key: call.signature}}
    return entry


def parse_tool_call(call_id: str, name: str, arguments: str | dict | None, tools: list[ToolSpec],
                    signature: str | None = None) -> ToolCall:
    """A ToolCall from what the model wrote, with `error` saying what is wrong with it, if anything.
    Empty arguments mean `{}` (several servers send "" for a tool without parameters)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments if arguments is not None else {})
    parsed: Any = arguments if isinstance(arguments, dict) else {}
    error = None
    if isinstance(arguments, str) and arguments.strip():
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError as exc:
            parsed, error = None, f"the arguments of {name!r} are not valid JSON ({exc.msg} at position {exc.pos})"
    if error is None and not isinstance(parsed, dict):
        parsed, error = None, f"the arguments of {name!r} must be a JSON object, not {type(parsed).__name__}"
    spec = next((tool for tool in tools if tool.name == name), None)
    if spec is None:
        error = f"there is no tool named {name!r}; the tools are: {', '.join(t.name for t in tools) or 'none'}"
    elif error is None:
        missing = [key for key in spec.parameters.get("required", []) if key not in parsed]
        if missing:
            error = f"{name!r} is missing required argument(s): {', '.join(missing)}"
    return ToolCall(call_id, name, parsed, raw, error, signature)
