"""Real local HTTP servers that play a language model from a script, for tests of code that calls models through
the openai and google-genai SDKs (as vLLM, Ollama or a Gemini endpoint would answer).

Each server answers each request with the next scripted `Reply`: text, tool calls, an HTTP error, a raw body (a
proxy's HTML page), after a delay, with given usage. It records every request (path and JSON body) so a test can
assert what the client sent. When the script runs out it answers 500 — unless `forever(reply)` set a reply to repeat
(e.g. a model that never stops calling tools) — so a test never hangs.

    with OpenAIServer() as server:
        server.tool_call("sql_execute", '{"query": "select 1"}')
        server.text("done")
        model = OpenAIToolChat("scripted", base_url=server.base_url, timeout_s=5, max_retries=1)
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted answer. `tool_calls` are (name, arguments) pairs: an arguments string is sent as written
    (OpenAI; it may be malformed JSON on purpose), a dict as an object. `status` other than 200 sends an error
    with `text` as its message."""

    text: str | None = None
    tool_calls: tuple[tuple[str, str | dict], ...] = ()
    status: int = 200
    delay_s: float = 0.0
    usage: tuple[int, int] | None = (10, 5)  # (input, output) tokens; None leaves usage out of the response
    finish_reason: str | None = None  # default: "tool_calls"/"STOP" depending on the reply
    headers: dict[str, str] = field(default_factory=dict)
    raw: str | None = None  # sent as the whole body instead of the protocol's JSON (an HTML error page, say)
    content_type: str = "application/json"


@dataclass(frozen=True)
class Request:
    path: str
    body: dict
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names


class _ScriptedServer:
    """The HTTP plumbing shared by the protocol flavours below: a queue of replies and a log of requests."""

    def __init__(self):
        self.script: list[Reply] = []
        self.requests: list[Request] = []
        self.default: Reply | None = None
        self.policy: Callable[[Request], Reply] | None = None
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.address = f"http://127.0.0.1:{self._http.server_port}"

    # --- scripting ------------------------------------------------------------------------------------------------

    def add(self, reply: Reply) -> Reply:
        self.script.append(reply)
        return reply

    def text(self, content: str, *, usage: tuple[int, int] | None = (10, 5), delay_s: float = 0.0) -> Reply:
        return self.add(Reply(text=content, usage=usage, delay_s=delay_s))

    def tool_call(self, name: str, arguments: str | dict = "{}", *, text: str | None = None,
                  usage: tuple[int, int] | None = (10, 5)) -> Reply:
        return self.add(Reply(text=text, tool_calls=((name, arguments),), usage=usage))

    def tool_calls(self, *calls: tuple[str, str | dict], usage: tuple[int, int] | None = (10, 5)) -> Reply:
        return self.add(Reply(tool_calls=tuple(calls), usage=usage))

    def error(self, status: int, message: str = "scripted error", **headers: str) -> Reply:
        """An HTTP error. 429s carry Retry-After: 0 (and retry-after-ms: 20, which the openai SDK prefers, so its
        retry waits 20 ms rather than its own backoff)."""
        if status == 429:
            headers = {"Retry-After": "0", "retry-after-ms": "20", **headers}
        return self.add(Reply(text=message, status=status, headers=headers))

    def raw(self, body: str, content_type: str = "text/html", status: int = 200) -> Reply:
        """A body that is not the protocol's JSON, e.g. a proxy's HTML error page or another API's JSON."""
        return self.add(Reply(raw=body, content_type=content_type, status=status))

    def delay(self, seconds: float, then: Reply | None = None) -> Reply:
        """Answer only after `seconds` (to outlast a client's timeout), with `then` or a short text."""
        return self.add(replace(then or Reply(text="too late"), delay_s=seconds))

    def respond(self, policy: Callable[[Request], Reply]) -> None:
        """Answer every request the script does not cover with `policy(request)`: a model that decides from what it
        is sent (e.g. an agent that follows a task's gold), for runs with many concurrent conversations."""
        self.policy = policy

    def forever(self, reply: Reply) -> None:
        """Answer `reply` whenever the script is empty, e.g. `forever(Reply(tool_calls=(("t", "{}"),)))` for a
        model that never stops calling tools."""
        self.default = reply

    def bodies(self) -> list[dict]:
        return [request.body for request in self.requests]

    # --- protocol (subclasses) ---------------------------------------------------------------------------------------

    def route(self, path: str) -> bool:
        raise NotImplementedError

    def render(self, reply: Reply, request: Request, index: int) -> dict:
        raise NotImplementedError

    def render_error(self, reply: Reply) -> dict:
        raise NotImplementedError

    # --- plumbing --------------------------------------------------------------------------------------------------

    def _next(self, request: Request) -> tuple[Reply, int]:
        with self._lock:
            self.requests.append(request)
            if self.script:
                return self.script.pop(0), len(self.requests)
            index = len(self.requests)
        if self.policy is not None:  # outside the lock: requests of concurrent conversations are answered in parallel
            return self.policy(request), index
        return self.default or Reply(text="no scripted reply left", status=500), index

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                path = self.path.split("?", 1)[0]
                if not server.route(path):
                    return self._send(404, {"error": {"message": f"no route {path}"}})
                request = Request(path, body, {name.lower(): value for name, value in self.headers.items()})
                reply, index = server._next(request)
                time.sleep(reply.delay_s)
                if reply.raw is not None:
                    return self._send_bytes(reply.status, reply.raw.encode(), reply.content_type, reply.headers)
                if reply.status != 200:
                    return self._send(reply.status, server.render_error(reply), reply.headers)
                return self._send(200, server.render(reply, request, index), reply.headers)

            def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None):
                self._send_bytes(status, json.dumps(payload).encode(), "application/json", headers)

            def _send_bytes(self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None):
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting (a timeout test)
                    pass

            def log_message(self, *args):
                pass

        return Handler

    def __enter__(self):
        threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._http.shutdown()
        self._http.server_close()


class OpenAIServer(_ScriptedServer):
    """`POST /v1/chat/completions` (and `/chat/completions`) in OpenAI's shape; `base_url` ends in /v1."""

    def __init__(self):
        super().__init__()
        self.base_url = f"{self.address}/v1"

    def route(self, path: str) -> bool:
        return path in ("/v1/chat/completions", "/chat/completions")

    def render(self, reply: Reply, request: Request, index: int) -> dict:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{index}_{n}", "type": "function",
                 "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                for n, (name, args) in enumerate(reply.tool_calls)]
        payload: dict[str, Any] = {
            "id": f"chatcmpl-{index}", "object": "chat.completion", "created": 0, "model": request.body.get("model"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")}]}
        if reply.usage is not None:
            payload["usage"] = {"prompt_tokens": reply.usage[0], "completion_tokens": reply.usage[1],
                                "total_tokens": sum(reply.usage)}
        return payload

    def render_error(self, reply: Reply) -> dict:
        return {"error": {"message": reply.text, "type": "scripted", "code": reply.status}}


class GeminiServer(_ScriptedServer):
    """`POST /v1beta/models/<model>:generateContent` in the Gemini REST shape (candidates[0].content.parts with
    text or functionCall, usageMetadata); `base_url` is the server root. Tool-call arguments must be JSON objects:
    Gemini sends a Struct, so malformed JSON cannot happen there (a string is parsed before sending)."""

    def __init__(self):
        super().__init__()
        self.base_url = self.address

    def route(self, path: str) -> bool:
        return path.startswith("/v1beta/models/") and path.endswith(":generateContent")

    @staticmethod
    def model_of(request: Request) -> str:
        return request.path.removeprefix("/v1beta/models/").removesuffix(":generateContent")

    def render(self, reply: Reply, request: Request, index: int) -> dict:
        parts: list[dict] = [{"text": reply.text}] if reply.text is not None else []
        parts += [{"functionCall": {"name": name, "args": json.loads(args) if isinstance(args, str) else args}}
                  for name, args in reply.tool_calls]
        payload: dict[str, Any] = {
            "candidates": [{"index": 0, "content": {"role": "model", "parts": parts},
                            "finishReason": reply.finish_reason or "STOP"}],
            "modelVersion": self.model_of(request), "responseId": f"response-{index}"}
        if reply.usage is not None:
            payload["usageMetadata"] = {"promptTokenCount": reply.usage[0], "candidatesTokenCount": reply.usage[1],
                                        "totalTokenCount": sum(reply.usage)}
        return payload

    def render_error(self, reply: Reply) -> dict:
        statuses = {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 400: "INVALID_ARGUMENT"}
        return {"error": {"code": reply.status, "message": reply.text, "status": statuses.get(reply.status, "UNKNOWN")}}
