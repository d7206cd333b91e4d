"""The answer judge (ehrbench.evaluation.judge) through the real openai SDK against a local server with scripted
replies (tests/llm_servers.py): the normalised match decides without a request, the model's verdict decides the
rest, an unreadable verdict falls back to the match, and what the request carries."""

from __future__ import annotations

import json

import pytest

from ehrbench.evaluation.judge import AnswerJudge, Judgement
from ehrbench.llm.chat import ChatError
from ehrbench.llm.openai_tools import OpenAIToolChat
from ehrbench.llm.tool_chat import Usage
from tests.llm_servers import OpenAIServer

pytestmark = pytest.mark.integration

QUESTION = "When was the last hospital admission of patient 10005817?"
GOLD = "[['2100-12-20 01:43:00']]"
PROSE = "The patient was last admitted on December 20, 2100, at 1:43 AM."  # right, but beyond the rules


@pytest.fixture
def server():
    with OpenAIServer() as scripted:
        yield scripted


def _judge(server: OpenAIServer) -> AnswerJudge:
    return AnswerJudge(OpenAIToolChat("scripted", base_url=server.base_url, timeout_s=5, max_retries=0))


def test_a_matching_answer_is_correct_without_a_request(server):
    judgement = _judge(server).judge(QUESTION, GOLD, ["2100-12-20T01:43:00-04:00"])
    assert judgement == Judgement(True, judgement.reason, Usage(), "match")
    assert server.requests == []


def test_no_answer_is_incorrect_without_a_request(server):
    judgement = _judge(server).judge(QUESTION, GOLD, None)
    assert (judgement.correct, judgement.method, judgement.usage) == (False, "match", Usage())
    assert server.requests == []


def test_the_model_decides_what_the_rules_reject_and_sees_question_gold_and_answer(server):
    server.text('{"correct": true, "reason": "Same date and time, in words."}', usage=(210, 12))

    judgement = _judge(server).judge(QUESTION, GOLD, PROSE)

    assert judgement == Judgement(True, "Same date and time, in words.", Usage(210, 12), "llm")
    [body] = server.bodies()
    assert body["temperature"] == 0.0 and "tools" not in body
    system, user = body["messages"]
    assert system["role"] == "system" and '"correct"' in system["content"]
    assert user["role"] == "user"
    assert QUESTION in user["content"] and PROSE in user["content"]
    assert "2100-12-20 01:43:00" in user["content"] and "[[" not in user["content"]  # gold as values, not a repr


def test_the_model_can_say_incorrect(server):
    server.text('{"correct": false, "reason": "The time is 13:43, not 01:43."}')
    judgement = _judge(server).judge(QUESTION, GOLD, "On December 20, 2100 at 1:43 PM.")
    assert judgement == Judgement(False, "The time is 13:43, not 01:43.", Usage(10, 5), "llm")
    assert len(server.requests) == 1


def test_a_verdict_in_a_code_fence_amid_prose_is_read(server):
    server.text('Let me compare.\n```json\n{"correct": true, "reason": "same"}\n```\nDone.')
    judgement = _judge(server).judge(QUESTION, GOLD, PROSE)
    assert (judgement.correct, judgement.reason, judgement.method) == (True, "same", "llm")


def test_an_unreadable_verdict_falls_back_to_the_match(server):
    server.text("I think the answer is probably right.", usage=(200, 9))
    judgement = _judge(server).judge(QUESTION, GOLD, PROSE)
    assert (judgement.correct, judgement.method, judgement.usage) == (False, "match", Usage(200, 9))
    assert "unreadable" in judgement.reason and "probably right" in judgement.reason
    assert f"openai:scripted@{server.base_url}" in judgement.reason  # which endpoint answered so


def test_a_verdict_without_a_boolean_falls_back_to_the_match(server):
    server.text('{"correct": "maybe", "reason": "unsure"}')
    judgement = _judge(server).judge(QUESTION, GOLD, PROSE)
    assert (judgement.correct, judgement.method) == (False, "match")


def test_a_list_answer_and_empty_gold_are_rendered_for_the_model(server):
    server.text('{"correct": true, "reason": "none found"}')
    predicted = ["There were no admissions in that period."]

    judgement = _judge(server).judge(QUESTION, "[]", predicted)

    assert judgement.correct and judgement.method == "llm"
    user = server.bodies()[0]["messages"][1]["content"]
    assert json.dumps(predicted) in user and "no rows" in user


def test_multi_column_gold_keeps_each_row_together(server):
    server.text('{"correct": false, "reason": "values swapped"}')
    gold = "[['2100-03-19', '50.0'], ['2100-03-20', '60.0']]"
    _judge(server).judge("Daily minimum volumes?", gold, "50 on the 20th and 60 on the 19th")
    user = server.bodies()[0]["messages"][1]["content"]
    assert "2 rows" in user and "2100-03-19 | 50.0\n2100-03-20 | 60.0" in user


def test_a_server_error_raises_chat_error(server):
    server.error(500, "the GPU caught fire")
    with pytest.raises(ChatError, match="GPU caught fire"):
        _judge(server).judge(QUESTION, GOLD, PROSE)
    assert len(server.requests) == 1  # max_retries=0: one attempt


def test_without_a_model_only_the_match_decides():
    judge = AnswerJudge()
    rejected = judge.judge(QUESTION, GOLD, PROSE)
    assert (rejected.correct, rejected.method, rejected.usage) == (False, "match", Usage())
    accepted = judge.judge(QUESTION, GOLD, "2100-12-20 01:43")
    assert (accepted.correct, accepted.method, accepted.usage) == (True, "match", Usage())
