"""The LLM paraphraser against a real HTTP server that speaks the OpenAI chat-completions protocol with scripted
replies (as vLLM, Ollama or llama.cpp would), through the openai SDK: acceptance, slot-loss fallback, retry of a
rate limit, and a cached rerun that sends nothing."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ehrbench.llm import ChatError, ResponseCache, chat_model
from ehrbench.questions.paraphrase import LlmParaphraser, OfflineParaphraser, paraphrase_questions

from ..unit.test_paraphrase import DIFFERENT, LOST_SLOT, TEMPLATES, question_for

pytestmark = pytest.mark.integration


class ScriptedServer:
    """POST /v1/chat/completions answers with the next scripted (status, content) in turn; records the bodies."""

    def __init__(self):
        self.script: list[tuple[int, str]] = []
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.base_url = f"http://127.0.0.1:{self._http.server_port}/v1"

    def reply(self, content: str, status: int = 200) -> None:
        self.script.append((status, content))

    def _next(self, body: dict) -> tuple[int, str]:
        with self._lock:
            self.requests.append(body)
            return self.script.pop(0) if self.script else (500, "no scripted reply left")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                status, content = server._next(body)
                if status != 200:
                    return self._send(status, {"error": {"message": content, "type": "scripted"}},
                                      {"retry-after-ms": "20"})
                return self._send(200, {
                    "id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion", "created": 0,
                    "model": body["model"], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}]})

            def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        return Handler

    def __enter__(self) -> ScriptedServer:
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._http.shutdown()
        self._http.server_close()


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def _paraphraser(server: ScriptedServer, cache: ResponseCache) -> LlmParaphraser:
    model = chat_model(f"openai:scripted-llama@{server.base_url}", timeout_s=5, max_retries=2)
    return LlmParaphraser(model, cache, OfflineParaphraser(TEMPLATES, seed=0), n_candidates=2, temperature=0.7)


def test_paraphrases_over_http_with_retry_fallback_and_a_cached_rerun(server, tmp_path):
    other = DIFFERENT.replace("10009628", "10018845")
    questions = [question_for(), question_for(patient_id="10018845"), question_for(patient_id="10025463")]
    server.reply(json.dumps([DIFFERENT]))
    server.reply("rate limited", status=429)  # the SDK waits (retry-after-ms) and sends the request again
    server.reply(f"1. {other}")
    server.reply(json.dumps([LOST_SLOT.replace("10009628", "10025463")]))  # loses `average`
    cache = ResponseCache(tmp_path / "cache" / "llm.sqlite")

    report = paraphrase_questions(questions, _paraphraser(server, cache))

    assert len(server.requests) == 4 and not server.script
    assert server.requests[1] == server.requests[2]  # the retried request is the same request
    first_request = server.requests[0]
    assert first_request["model"] == "scripted-llama" and first_request["temperature"] == 0.7
    assert '"10009628"' in first_request["messages"][-1]["content"]
    assert report.to_dict() == {"questions": 3, "accepted": 2, "rejected_lost_slots": 1, "rejected_too_similar": 0,
                                "fallbacks": 1, "lost_slots": 0}
    assert [q.question for q in questions[:2]] == [DIFFERENT, other]
    assert [q.paraphrase_source for q in questions[:2]] == ["llm:scripted-llama"] * 2
    fallback = questions[2]
    assert fallback.paraphrase_source.startswith("offline:")
    assert fallback.question == OfflineParaphraser(TEMPLATES).paraphrase(question_for(patient_id="10025463")).text
    assert "1 of 1 lost a slot value" in fallback.extra["paraphrase_fallback"]
    assert all(q.paraphrase_keeps_slots for q in questions)

    # a rerun with the same cache: same questions, not one request (the script is empty: a request would get 500)
    rerun = [question_for(), question_for(patient_id="10018845"), question_for(patient_id="10025463")]
    assert paraphrase_questions(rerun, _paraphraser(server, ResponseCache(cache.path))) == report
    assert len(server.requests) == 4
    assert [q.question for q in rerun] == [q.question for q in questions]


def test_an_endpoint_that_keeps_failing_raises_a_chat_error_naming_the_model(server, tmp_path):
    for _ in range(3):
        server.reply("overloaded", status=503)
    with pytest.raises(ChatError, match=r"openai:scripted-llama@http://127\.0\.0\.1:\d+/v1: .*overloaded"):
        paraphrase_questions([question_for()], _paraphraser(server, ResponseCache(tmp_path / "llm.sqlite")))
    assert len(server.requests) == 3  # one request and max_retries=2 retries
