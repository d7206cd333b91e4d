"""Tool calling with Gemini through google-genai (Google AI Studio key), behind the same `ToolChatModel` interface
as the OpenAI-compatible endpoints: the OpenAI-format history is converted to Gemini's contents (`gemini_contents`)
and each response back to a `ChatTurn` (`gemini_turn`), thought signatures included.

google-genai is imported inside the functions, not at the top: it takes seconds to import and only Gemini runs need
it. An endpoint that still fails after the SDK's retries raises `ChatError`, naming the model and the endpoint's words.
"""

from __future__ import annotations

import base64
import json
import os
import time
from typing import TYPE_CHECKING, Any

from ehrbench.errors import ConfigError
from ehrbench.llm.chat import ChatError, endpoint_name, httpx_errors, read_reply, unreadable_reply
from ehrbench.llm.tool_chat import THOUGHT_SIGNATURE_KEY, ChatTurn, ToolSpec, Usage, parse_tool_call

if TYPE_CHECKING:
    from google.genai import types as genai_types


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
            raise ConfigError(f"gemini:{model} needs an API key: pass one or set GEMINI_API_KEY (or GOOGLE_API_KEY)")
        # imported here, not at the top (see the module docstring)
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
    for key in THOUGHT_SIGNATURE_KEY:
        value = value.get(key) if isinstance(value, dict) else None
    return base64.b64decode(value) if value else None


def _enum_text(value: Any) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))
