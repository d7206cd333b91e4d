"""Tool (function) calling over one interface, for ReAct-style agents: an OpenAI-compatible client (OpenAI, vLLM,
Ollama, llama.cpp server) and a Gemini client, chosen by the same model specs as `chat_model`.

Messages use OpenAI's chat format: roles system, user, assistant (optionally with `tool_calls`) and tool (with
`tool_call_id`); `assistant_message` and `tool_result_message` build the last two from a `ChatTurn`. The Gemini
client converts that format to its own (`gemini_contents`). A model's bad tool call (arguments that are not a JSON
object, an unknown tool, a missing required argument) never raises: it comes back as a `ToolCall` with `error` set,
for the agent loop to answer the model with and to count. What does raise is an endpoint that still fails after its
retries (429, 5xx, timeouts, retried by the SDKs themselves): `ChatError`, naming the model and the endpoint's words.
Token counts come from the responses; `cost_usd` prices them from `prices.yaml`.
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol

import yaml

from ehrbench.llm.chat import (
    ChatError,
    ModelSpec,
    OpenAIEndpoint,
    endpoint_name,
    httpx_errors,
    message_text,
    openai_sdk,
    read_reply,
    unreadable_reply,
)

if TYPE_CHECKING:
    from google.genai import types as genai_types

# How Google's own OpenAI-compatible endpoint carries a Gemini thought signature inside an OpenAI tool call; Gemini
# wants it sent back with the call, so the OpenAI-format history keeps it in the same place.
_SIGNATURE_KEY = ("extra_content", "google", "thought_signature")


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
        entry[_SIGNATURE_KEY[0]] = {_SIGNATURE_KEY[1]: {_SIGNATURE_KEY[2]: call.signature}}
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


# --- OpenAI-compatible endpoints -------------------------------------------------------------------------------------

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


# --- Gemini ----------------------------------------------------------------------------------------------------------

class GeminiToolChat:
    """Tool calling with Gemini (Google AI Studio key). `base_url` points the client at another server speaking the
    Gemini REST API (v1beta), e.g. a test fake. google-genai retries 408/429/5xx, timeouts and connection errors with
    exponential backoff starting at `initial_backoff_s` (it does not read Retry-After)."""

    provider = "gemini"

    def __init__(self, model: str, api_key: str | None = None, timeout_s: float = 60.0, max_retries: int = 4, *,
                 base_url: str | None = None, initial_backoff_s: float = 1.0):
        self.model, self.base_url, self.timeout_s = model, base_url, timeout_s
        api_key = api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        if not api_key:
            raise ValueError(f"gemini:{model} needs an API key: pass one or set GEMINI_API_KEY (or GOOGLE_API_KEY)")
        # imported here, not at the top: google-genai takes seconds to import and only Gemini runs need it
        from google import genai
        from google.genai import types as genai_types

        retry = genai_types.HttpRetryOptions(attempts=max_retries + 1, initial_delay=initial_backoff_s,
                                             jitter=initial_backoff_s)
        options = genai_types.HttpOptions(timeout=int(timeout_s * 1000), retry_options=retry, base_url=base_url,
                                          api_version="v1beta" if base_url else None)
        self._client = genai.Client(api_key=api_key, http_options=options)

    def chat(self, messages: list[dict], tools: list[ToolSpec], *, temperature: float = 0.0,
             max_tokens: int | None = None) -> ChatTurn:
        import pydantic
        from google.genai import errors as genai_errors
        from google.genai import types as genai_types

        system, contents = gemini_contents(messages)
        config = genai_types.GenerateContentConfig(
            temperature=temperature, max_output_tokens=max_tokens, system_instruction=system,
            tools=[gemini_tool(tools)] if tools else None,
            automatic_function_calling=genai_types.AutomaticFunctionCallingConfig(disable=True))
        start = time.perf_counter()
        try:
            response = self._client.models.generate_content(model=self.model, contents=contents, config=config)
        except genai_errors.APIError as exc:
            raise ChatError(f"{self._name()}: {exc}") from exc
        except httpx_errors("TimeoutException") as exc:
            raise ChatError(f"{self._name()}: timed out after {self.timeout_s} s on every attempt: {exc!r}") from exc
        except httpx_errors("TransportError") as exc:
            raise ChatError(f"{self._name()}: {exc!r}") from exc
        except pydantic.ValidationError as exc:  # a body the SDK cannot read (not something Gemini itself sends)
            raise ChatError(f"{self._name()}: unreadable reply: {exc}") from exc
        except json.JSONDecodeError as exc:  # google-genai parses every body as JSON (an HTML page too)
            raise unreadable_reply(self._name(), None, exc) from exc
        latency = time.perf_counter() - start
        return read_reply(self._name(), response, lambda reply: gemini_turn(reply, tools, latency))

    def _name(self) -> str:
        return endpoint_name(self)


def gemini_tool(tools: list[ToolSpec]) -> genai_types.Tool:
    from google.genai import types as genai_types

    # parameters_json_schema takes the JSON schema as is; `parameters` would need Gemini's own Schema subset
    return genai_types.Tool(function_declarations=[
        genai_types.FunctionDeclaration(name=t.name, description=t.description, parameters_json_schema=t.parameters)
        for t in tools])


def gemini_contents(messages: list[dict]) -> tuple[str | None, list[genai_types.Content]]:
    """OpenAI-format messages as Gemini's (system_instruction, contents): system messages are joined into the
    instruction, assistant tool calls become function_call parts, and the tool results that follow them become
    function_response parts of one user turn (named after the call they answer, as Gemini requires)."""
    from google.genai import types as genai_types

    system: list[str] = []
    contents: list[genai_types.Content] = []
    call_names: dict[str, str] = {}
    for message in messages:
        role, text = message["role"], _text_of(message.get("content"))
        if role == "system":
            system.append(text)
        elif role == "user":
            contents.append(genai_types.Content(role="user", parts=[genai_types.Part(text=text)]))
        elif role == "assistant":
            parts = [genai_types.Part(text=text)] if text else []
            for call in message.get("tool_calls") or []:
                function = call["function"]
                call_names[call["id"]] = function["name"]
                parts.append(genai_types.Part(
                    function_call=genai_types.FunctionCall(id=call["id"], name=function["name"],
                                                           args=_json_object(function.get("arguments"))),
                    thought_signature=_signature_bytes(call)))
            contents.append(genai_types.Content(role="model", parts=parts or [genai_types.Part(text="")]))
        elif role == "tool":
            call_id = message["tool_call_id"]
            part = genai_types.Part(function_response=genai_types.FunctionResponse(
                id=call_id, name=message.get("name") or call_names.get(call_id, call_id), response=_response(text)))
            previous = contents[-1] if contents else None
            if previous is not None and previous.role == "user" and all(p.function_response for p in previous.parts):
                previous.parts.append(part)
            else:
                contents.append(genai_types.Content(role="user", parts=[part]))
        else:
            raise ValueError(f"message role {role!r} is not one of system, user, assistant, tool")
    return ("\n\n".join(system) or None), contents


def gemini_turn(response: genai_types.GenerateContentResponse, tools: list[ToolSpec], latency_s: float) -> ChatTurn:
    """A ChatTurn from a generate_content response (its first candidate; thought parts are left out)."""
    metadata = response.usage_metadata
    usage = Usage()
    if metadata:  # thinking tokens are billed as output
        output = (metadata.candidates_token_count or 0) + (metadata.thoughts_token_count or 0)
        usage = Usage(metadata.prompt_token_count or 0, output)
    if not response.candidates:
        feedback = response.prompt_feedback
        reason = feedback.block_reason if feedback and feedback.block_reason else None
        return ChatTurn(None, [], usage, _enum_text(reason) or "no_candidates", latency_s)
    candidate = response.candidates[0]
    parts = candidate.content.parts if candidate.content and candidate.content.parts else []
    texts = [part.text for part in parts if part.text and not part.thought]
    calls = []
    for part in parts:
        if part.function_call is None:
            continue
        call = part.function_call
        signature = base64.b64encode(part.thought_signature).decode() if part.thought_signature else None
        calls.append(parse_tool_call(call.id or f"call_{len(calls)}", call.name or "", call.args, tools, signature))
    return ChatTurn("".join(texts) if texts else None, calls, usage, _enum_text(candidate.finish_reason), latency_s)


def _text_of(content: Any) -> str:
    """Message content as text: OpenAI allows a string or a list of parts ({"type": "text", "text": ...})."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def _json_object(arguments: Any) -> dict:
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        parsed = None
    # a malformed call the model made earlier is replayed as what it wrote, so the history stays truthful
    return parsed if isinstance(parsed, dict) else {"raw_arguments": arguments}


def _response(text: str) -> dict:
    """A tool result as Gemini's function_response object: a JSON object as is, anything else under "result"."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"result": text}


def _signature_bytes(call: dict) -> bytes | None:
    value: Any = call
    for key in _SIGNATURE_KEY:
        value = value.get(key) if isinstance(value, dict) else None
    return base64.b64decode(value) if value else None


def _enum_text(value: Any) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))


# --- choosing a model by spec -----------------------------------------------------------------------------------------

def tool_chat_model(spec: str, *, api_key: str | None = None, timeout_s: float = 60.0,
                    max_retries: int = 4) -> ToolChatModel:
    """The tool-calling model a spec names: `openai:<model>`, `openai:<model>@<base_url>` or `gemini:<model>`."""
    parsed = ModelSpec.parse(spec)
    if parsed.provider == "gemini":
        return GeminiToolChat(parsed.model, api_key=api_key, timeout_s=timeout_s, max_retries=max_retries)
    return OpenAIToolChat(parsed.model, base_url=parsed.base_url, api_key=api_key, timeout_s=timeout_s,
                          max_retries=max_retries)


# --- cost ------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Price:
    """List price in USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float


@cache
def prices() -> dict[str, Price]:
    """The price table shipped in prices.yaml, by model name."""
    table = yaml.safe_load(resources.files("ehrbench.llm").joinpath("prices.yaml").read_text(encoding="utf-8"))
    return {name: Price(float(row["input"]), float(row["output"])) for name, row in table["models"].items()}


def price_for(model: str) -> Price | None:
    """The price of `model`: its exact name, else the longest known name it starts with followed by "-"
    (a dated snapshot such as gpt-4o-mini-2024-07-18 costs what gpt-4o-mini costs). None: unpriced."""
    name = model.removeprefix("models/")
    table = prices()
    if name in table:
        return table[name]
    prefixes = [known for known in table if name.startswith(known + "-")]
    return table[max(prefixes, key=len)] if prefixes else None


def cost_usd(model: str, usage: Usage) -> float | None:
    """What `usage` cost at list price; None when the model is unpriced (local and unknown models)."""
    price = price_for(model)
    if price is None:
        return None
    return (usage.input_tokens * price.input_per_mtok + usage.output_tokens * price.output_per_mtok) / 1_000_000
