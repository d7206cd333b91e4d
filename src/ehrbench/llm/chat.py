"""A small chat-completion interface: one protocol, an OpenAI-compatible client (OpenAI, vLLM, Ollama, llama.cpp
server) and a Gemini client, chosen by a model spec such as `openai:llama3@http://localhost:8000/v1`.

Messages use OpenAI's shape ({"role": "system" | "user" | "assistant", "content": text}); the Gemini client maps
them to its own. Clients retry rate limits, server errors and timeouts themselves (see `_client`); what still fails
is raised as `ChatError`, and so is a reply that is not the API's JSON (an HTML error page from a proxy, another
API's body): every ChatError names the endpoint (model and base URL).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ehrbench.errors import ConfigError, EhrbenchError

if TYPE_CHECKING:
    import openai
    from google.genai.types import Candidate

Message = dict[str, str]
PROVIDERS = ("openai", "gemini")
SPEC_FORM = "openai:<model>, openai:<model>@<base_url> or gemini:<model>"
# Local OpenAI-compatible servers ignore the key, but the SDK refuses to start without one.
PLACEHOLDER_API_KEY = "not-needed"
_SPEC = re.compile(r"^(?P<provider>[a-z]+):(?P<model>[^@\s]+?)(?:@(?P<base_url>https?://\S+))?$")
_T = TypeVar("_T")


class ChatError(EhrbenchError):
    """A model endpoint failed after its retries; the message names the model and the endpoint's words."""

    @property
    def transient(self) -> bool:
        """Whether trying again later may succeed: a rate limit, a server error, a timeout or a dropped
        connection — not a refused request (bad key, unknown model, invalid body)."""
        cause = self.__cause__
        if cause is None:
            return False
        status = getattr(cause, "status_code", None) or getattr(cause, "code", None)
        if isinstance(status, int):
            return status in (408, 409, 429) or status >= 500
        names = {cls.__name__ for cls in type(cause).__mro__}
        return bool(names & {"APITimeoutError", "APIConnectionError", "TimeoutException", "TransportError"})


class ChatModel(Protocol):
    provider: str
    model: str

    def complete(self, messages: list[Message], *, temperature: float, n: int = 1) -> list[str]:
        """Up to `n` completions of the conversation (some servers return fewer than asked for)."""
        ...


class Embedder(Protocol):
    provider: str
    model: str

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...


@dataclass(frozen=True)
class ModelSpec:
    provider: str
    model: str
    base_url: str | None = None

    @classmethod
    def parse(cls, spec: str) -> ModelSpec:
        match = _SPEC.match(spec.strip())
        if not match or match["provider"] not in PROVIDERS:
            raise ConfigError(f"model spec {spec!r} is not of the form {SPEC_FORM}")
        if match["provider"] == "gemini" and match["base_url"]:
            raise ConfigError(f"model spec {spec!r}: a Gemini model takes no base URL (expected {SPEC_FORM})")
        return cls(match["provider"], match["model"], match["base_url"])

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}" + (f"@{self.base_url}" if self.base_url else "")


def endpoint_name(model: Any) -> str:
    """A model client's spec with its endpoint, e.g. `openai:llama3@http://localhost:8000/v1`, for messages."""
    return str(ModelSpec(model.provider, model.model, getattr(model, "base_url", None)))


def unreadable_reply(endpoint: str, reply: object, exc: Exception) -> ChatError:
    """The ChatError of a reply that is not the API's JSON, naming the endpoint and what came instead."""
    if isinstance(exc, json.JSONDecodeError):  # the SDK parses a body declared as JSON
        detail = f"the reply is not valid JSON ({exc.msg} at position {exc.pos}): {_excerpt(exc.doc)}"
    elif isinstance(reply, str):  # the openai SDK hands back a body that is not JSON as text
        detail = f"the reply is not JSON: {_excerpt(reply)}"
    else:
        detail = f"the reply does not have the API's shape ({type(exc).__name__}: {exc})"
    return ChatError(f"{endpoint}: unreadable reply: {detail}")


def read_reply(endpoint: str, reply: Any, read: Callable[[Any], _T]) -> _T:
    """read(reply), or unreadable_reply when the reply is not what the API sends: the openai SDK does not validate
    replies, so an HTML page or another API's JSON only fails here, as AttributeError, TypeError and the like."""
    try:
        return read(reply)
    except (AttributeError, TypeError, ValueError, KeyError, IndexError) as exc:
        raise unreadable_reply(endpoint, reply, exc) from exc


def message_text(message: Any) -> str | None:
    """A chat message's text content; a TypeError for anything else (a reply of the wrong shape)."""
    content = message.content
    if content is not None and not isinstance(content, str):
        raise TypeError(f"the message content is {type(content).__name__}, not text")
    return content


def _excerpt(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")


class OpenAIEndpoint:
    """A model on an OpenAI-compatible endpoint, with its SDK client."""

    provider = "openai"

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None, timeout_s: float = 60.0,
                 max_retries: int = 4):
        self.model = model
        self.base_url = base_url
        self._client = _client(base_url, api_key, timeout_s, max_retries)

    def _name(self) -> str:
        return endpoint_name(self)


class OpenAIChat(OpenAIEndpoint):
    """Chat completions from any OpenAI-compatible endpoint."""

    def complete(self, messages: list[Message], *, temperature: float, n: int = 1) -> list[str]:
        # `n` is left out when 1: a few compatible servers reject the parameter altogether.
        extra = {"n": n} if n > 1 else {}
        try:
            response = self._client.chat.completions.create(model=self.model, messages=messages,
                                                            temperature=temperature, **extra)
        except openai_sdk().OpenAIError as exc:
            raise ChatError(f"{self._name()}: {exc}") from exc
        except json.JSONDecodeError as exc:
            raise unreadable_reply(self._name(), None, exc) from exc
        return read_reply(self._name(), response, lambda reply: [
            message_text(choice.message) or "" for choice in sorted(reply.choices, key=lambda c: c.index)])


class OpenAIEmbeddings(OpenAIEndpoint):
    """Embeddings from any OpenAI-compatible endpoint (POST /embeddings)."""

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        try:
            response = self._client.embeddings.create(model=self.model, input=texts)
        except openai_sdk().OpenAIError as exc:
            raise ChatError(f"{self._name()}: {exc}") from exc
        except (AttributeError, ValueError) as exc:  # the SDK reads the embeddings' reply within create()
            raise unreadable_reply(self._name(), None, exc) from exc
        return read_reply(self._name(), response, lambda reply: [
            item.embedding for item in sorted(reply.data, key=lambda item: item.index)])


class GeminiChat:
    """Chat completions from Gemini (Google AI Studio key)."""

    provider = "gemini"

    def __init__(self, model: str, api_key: str | None = None, timeout_s: float = 60.0, max_retries: int = 4):
        self.model, self.timeout_s = model, timeout_s
        api_key = api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        if not api_key:
            raise ConfigError(f"gemini:{model} needs an API key: pass one or set GEMINI_API_KEY (or GOOGLE_API_KEY)")
        # imported here, not at the top: google-genai takes seconds to import and only Gemini runs need it
        from google import genai
        from google.genai import types as genai_types

        # google-genai retries 408/429/5xx and transient connection errors itself, with exponential backoff.
        options = genai_types.HttpOptions(timeout=int(timeout_s * 1000),
                                          retry_options=genai_types.HttpRetryOptions(attempts=max_retries + 1))
        self._client = genai.Client(api_key=api_key, http_options=options)

    def complete(self, messages: list[Message], *, temperature: float, n: int = 1) -> list[str]:
        from google.genai import errors as genai_errors
        from google.genai import types as genai_types

        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        contents = [genai_types.Content(role="model" if m["role"] == "assistant" else "user",
                                        parts=[genai_types.Part(text=m["content"])])
                    for m in messages if m["role"] != "system"]
        config = genai_types.GenerateContentConfig(temperature=temperature, candidate_count=n if n > 1 else None,
                                                   system_instruction=system or None)
        try:
            response = self._client.models.generate_content(model=self.model, contents=contents, config=config)
        except genai_errors.APIError as exc:
            raise ChatError(f"gemini:{self.model}: {exc}") from exc
        except httpx_errors("TimeoutException") as exc:
            raise ChatError(f"gemini:{self.model}: timed out after {self.timeout_s} s on every attempt: "
                            f"{exc!r}") from exc
        except httpx_errors("TransportError") as exc:
            raise ChatError(f"gemini:{self.model}: {exc!r}") from exc
        except json.JSONDecodeError as exc:  # google-genai parses every body as JSON
            raise unreadable_reply(f"gemini:{self.model}", None, exc) from exc
        return read_reply(f"gemini:{self.model}", response,
                          lambda reply: [_text(candidate) for candidate in reply.candidates or []])


def httpx_errors(name: str) -> tuple[type[Exception], ...]:
    """The httpx exception class `name` from httpx and from httpx2, the fork google-genai uses when installed: a
    timeout or a dropped connection reaches the caller as one of these, not as a google-genai APIError."""
    import importlib

    found = []
    for module in ("httpx", "httpx2"):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def _text(candidate: Candidate) -> str:
    parts = candidate.content.parts if candidate.content else None
    return "".join(part.text or "" for part in parts or [])


def chat_model(spec: str, *, api_key: str | None = None, timeout_s: float = 60.0, max_retries: int = 4) -> ChatModel:
    """The chat model a spec names: `openai:<model>`, `openai:<model>@<base_url>` or `gemini:<model>`."""
    parsed = ModelSpec.parse(spec)
    if parsed.provider == "gemini":
        return GeminiChat(parsed.model, api_key=api_key, timeout_s=timeout_s, max_retries=max_retries)
    return OpenAIChat(parsed.model, base_url=parsed.base_url, api_key=api_key, timeout_s=timeout_s,
                      max_retries=max_retries)


def embedding_model(spec: str, *, api_key: str | None = None, timeout_s: float = 60.0,
                    max_retries: int = 4) -> Embedder:
    """The embedding model a spec names; only OpenAI-compatible endpoints (`openai:<model>[@<base_url>]`)."""
    parsed = ModelSpec.parse(spec)
    if parsed.provider != "openai":
        raise ConfigError(f"embedding model spec {spec!r}: only openai:<model>[@<base_url>] endpoints embed")
    return OpenAIEmbeddings(parsed.model, base_url=parsed.base_url, api_key=api_key, timeout_s=timeout_s,
                            max_retries=max_retries)


def _client(base_url: str | None, api_key: str | None, timeout_s: float, max_retries: int) -> openai.OpenAI:
    """An OpenAI SDK client. Retries are the SDK's own (`max_retries`): it retries 408/409/429/5xx, connection
    errors and timeouts with exponential backoff and jitter and honours the server's Retry-After headers, which a
    hand-written loop would have to reimplement."""
    api_key = api_key or os.environ.get("OPENAI_API_KEY") or (PLACEHOLDER_API_KEY if base_url else None)
    if not api_key:
        raise ConfigError("an OpenAI model needs an API key: pass one or set OPENAI_API_KEY "
                         "(a local server named with @<base_url> needs none)")
    return openai_sdk().OpenAI(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=max_retries)


def openai_sdk():
    """The openai SDK, imported when a client is made: its import takes seconds, which offline builds skip."""
    import openai

    return openai
