"""The LLM paraphraser against a real HTTP server that speaks the OpenAI chat-completions protocol with scripted
replies (as vLLM, Ollama or llama.cpp would), through the openai SDK: acceptance, slot-loss fallback, retry of a
rate limit, and a cached rerun that sends nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from ehrbench.llm import ChatError, ResponseCache, chat_model
from ehrbench.questions.paraphrase import LlmParaphraser, OfflineParaphraser, paraphrase_questions

from ..llm_servers import OpenAIServer
from ..unit.test_paraphrase import DIFFERENT, LOST_SLOT, TEMPLATES, question_for

pytestmark = pytest.mark.integration


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


def _paraphraser(server: OpenAIServer, cache: ResponseCache) -> LlmParaphraser:
    model = chat_model(f"openai:scripted-llama@{server.base_url}", timeout_s=5, max_retries=2)
    return LlmParaphraser(model, cache, OfflineParaphraser(TEMPLATES, seed=0), n_candidates=2, temperature=0.7)


def test_paraphrases_over_http_with_retry_fallback_and_a_cached_rerun(server, tmp_path):
    other = DIFFERENT.replace("10009628", "10018845")
    questions = [question_for(), question_for(patient_id="10018845"), question_for(patient_id="10025463")]
    server.text(json.dumps([DIFFERENT]))
    server.error(429, "rate limited")  # the SDK waits (retry-after-ms) and sends the request again
    server.text(f"1. {other}")
    server.text(json.dumps([LOST_SLOT.replace("10009628", "10025463")]))  # loses `average`
    cache = ResponseCache(tmp_path / "cache" / "llm.sqlite")

    report = paraphrase_questions(questions, _paraphraser(server, cache))

    bodies = server.bodies()
    assert len(bodies) == 4 and not server.script
    assert bodies[1] == bodies[2]  # the retried request is the same request
    first_request = bodies[0]
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
        server.error(503, "overloaded")
    with pytest.raises(ChatError, match=r"openai:scripted-llama@http://127\.0\.0\.1:\d+/v1: .*overloaded"):
        paraphrase_questions([question_for()], _paraphraser(server, ResponseCache(tmp_path / "llm.sqlite")))
    assert len(server.requests) == 3  # one request and max_retries=2 retries
