"""The chatqa simulated user and its validator against real local chat-completions servers with scripted replies
(tests/llm_servers.py): what each model is sent (role swap, temperatures, the verifier's feedback in a reflection),
how verdicts are read, when the conversation stops, usage accounting and endpoint failures."""

from __future__ import annotations

import pytest

from ehrbench.agents.simulated_user import STOP_TOKEN, SimulatedUser, validate_conversation
from ehrbench.llm.chat import ChatError
from ehrbench.llm.openai_tools import OpenAIToolChat
from ehrbench.llm.tool_chat import Usage
from tests.llm_servers import OpenAIServer

pytestmark = pytest.mark.integration

INSTRUCTION = ("You are looking for information about hospital costs. Specifically, you want to know: What is the "
               "cost of diagnosing high potassium? Step by step, you tell the DB agent: (1) the diagnosis is high "
               "potassium.")
ACCEPT = '{"ok": true, "feedback": ""}'


@pytest.fixture
def user_server():
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def verifier_server():
    with OpenAIServer() as server:
        yield server


def _model(server: OpenAIServer, name: str) -> OpenAIToolChat:
    # no retries: a call the script did not plan for gets the server's 500 and fails the test at once
    return OpenAIToolChat(name, base_url=server.base_url, timeout_s=5, max_retries=0)


def _user(user_server, verifier_server=None, **options) -> SimulatedUser:
    verifier = _model(verifier_server, "verifier") if verifier_server else None
    return SimulatedUser(_model(user_server, "user"), INSTRUCTION, verifier=verifier, **options)


def _roles(body: dict) -> list[tuple[str, str]]:
    return [(message["role"], message["content"]) for message in body["messages"]]


def test_opening_message_is_drafted_hot_and_verified_cold(user_server, verifier_server):
    user_server.text("Hi, I have a question about hospital costs.", usage=(300, 12))
    verifier_server.text(ACCEPT, usage=(400, 9))
    user = _user(user_server, verifier_server)

    turn = user.start()

    assert turn.text == "Hi, I have a question about hospital costs." and not turn.stopped
    assert turn.reflections == 0 and turn.usage == Usage(700, 21) == user.usage and user.turns == 1
    assert user.transcript == [{"role": "user", "content": "Hi, I have a question about hospital costs."}]
    [drafted] = user_server.bodies()
    [verified] = verifier_server.bodies()
    assert drafted["temperature"] == 1.0 and verified["temperature"] == 0.0
    assert "tools" not in drafted and "tools" not in verified
    system, cue = drafted["messages"]
    assert system["role"] == "system" and INSTRUCTION in system["content"] and STOP_TOKEN in system["content"]
    assert cue["role"] == "user"  # the opening needs a turn to answer; the agent has said nothing yet
    verifier_request = verified["messages"][-1]["content"]
    assert INSTRUCTION in verifier_request and "Hi, I have a question about hospital costs." in verifier_request


def test_rejected_draft_is_redrafted_with_the_feedback(user_server, verifier_server):
    user_server.text("What does it cost to diagnose high potassium for patient 10004733?", usage=(100, 10))
    user_server.text("Hello, I'd like some information about hospital costs.", usage=(120, 11))
    verifier_server.text('{"ok": false, "feedback": "You invented a patient id and gave details too early."}',
                         usage=(200, 20))
    verifier_server.text('```json\n{"ok": true, "feedback": ""}\n```', usage=(210, 3))
    user = _user(user_server, verifier_server)

    turn = user.start()

    assert turn.text == "Hello, I'd like some information about hospital costs." and turn.reflections == 1
    assert turn.usage == Usage(100 + 120 + 200 + 210, 10 + 11 + 20 + 3)
    first, reflection = user_server.bodies()
    assert reflection["temperature"] == 1.0
    assert reflection["messages"][:len(first["messages"])] == first["messages"]
    rejected, note = reflection["messages"][len(first["messages"]):]
    assert rejected == {"role": "assistant",
                        "content": "What does it cost to diagnose high potassium for patient 10004733?"}
    assert note["role"] == "user" and "You invented a patient id and gave details too early." in note["content"]
    assert user.transcript == [
        {"role": "verifier", "ok": False, "draft": "What does it cost to diagnose high potassium for patient 10004733?",
         "content": "You invented a patient id and gave details too early."},
        {"role": "user", "content": "Hello, I'd like some information about hospital costs."}]
    # the second verification judged the redraft, not the rejected draft
    assert "Hello, I'd like some information" in verifier_server.bodies()[1]["messages"][-1]["content"]


def test_reflections_stop_at_the_limit_and_the_last_draft_is_used(user_server, verifier_server):
    for draft in ("draft one", "draft two", "draft three"):
        user_server.text(draft)
    # verdicts amid prose, after a stray brace, with the flag as a string: all read as rejections
    verifier_server.text('Verdict: {"ok": false, "feedback": "still wrong"} -- please fix.')
    verifier_server.text('The draft says {patient} again.\n{"ok": "false", "feedback": "still wrong"}')
    user = _user(user_server, verifier_server, max_reflections=2)

    turn = user.start()

    assert turn.text == "draft three" and turn.reflections == 2 and not turn.stopped
    assert len(user_server.requests) == 3 and len(verifier_server.requests) == 2  # the last draft is not judged
    second_reflection = user_server.bodies()[2]["messages"]
    assert [m["content"] for m in second_reflection if m["role"] == "assistant"] == ["draft one", "draft two"]
    assert [entry["role"] for entry in user.transcript] == ["verifier", "verifier", "verifier", "user"]
    assert "reflection limit" in user.transcript[2]["content"]


def test_unreadable_verdict_accepts_the_draft(user_server, verifier_server):
    user_server.text("Hi, I need some cost information.")
    verifier_server.text("The draft looks fine to me.")
    user = _user(user_server, verifier_server)

    turn = user.start()

    assert turn.text == "Hi, I need some cost information." and turn.reflections == 0
    note, said = user.transcript
    assert note["role"] == "verifier" and note["ok"] is True and "unreadable" in note["content"]
    assert f"openai:verifier@{verifier_server.base_url}" in note["content"]
    assert said == {"role": "user", "content": "Hi, I need some cost information."}


def test_roles_are_swapped_and_the_stop_token_ends_the_conversation(user_server):
    # no verifier given: the same model drafts and verifies, so drafts and verdicts alternate in one script
    for reply in ("Hi, I have a question about costs.", ACCEPT, f"Thanks, that's what I needed. {STOP_TOKEN}", ACCEPT):
        user_server.text(reply)
    user = SimulatedUser(_model(user_server, "user"), INSTRUCTION)

    user.start()
    turn = user.reply("The cost of diagnosing high potassium is 24.5.")

    assert turn.stopped and turn.text == "Thanks, that's what I needed." and user.turns == 2
    opening, verdict, closing, closing_verdict = user_server.bodies()
    assert verdict["temperature"] == 0.0 and closing["temperature"] == 1.0
    assert _roles(closing)[2:] == [("assistant", "Hi, I have a question about costs."),
                                   ("user", "The cost of diagnosing high potassium is 24.5.")]
    assert STOP_TOKEN in closing_verdict["messages"][-1]["content"]  # the verifier judges the stop itself
    assert user.transcript[-2:] == [
        {"role": "agent", "content": "The cost of diagnosing high potassium is 24.5."},
        {"role": "user", "content": "Thanks, that's what I needed.", "stopped": True}]
    with pytest.raises(RuntimeError, match="already ended"):
        user.reply("Anything else?")


def test_max_turns_stops_the_user_without_a_model_call(user_server):
    user_server.text("Hi, I have a question about costs.", usage=(50, 5))
    user_server.text("It's about diagnosing high potassium.", usage=(60, 6))
    user = _user(user_server, max_turns=2, max_reflections=0)  # no reflections: no verifier calls

    user.start()
    user.reply("Sure, what would you like to know?")
    turn = user.reply("Which diagnosis do you mean?")

    assert turn.stopped and "limit of 2 user messages" in turn.text and turn.usage == Usage()
    assert user.turns == 2 and user.usage == Usage(110, 11) and len(user_server.requests) == 2
    assert user.transcript[-1] == {"role": "user", "content": turn.text, "stopped": True, "turn_limit": True}


@pytest.mark.parametrize(("answer", "valid", "reason"), [
    ('{"valid": true, "reason": "The user followed the instruction."}', True, "The user followed the instruction."),
    ('Here is my verdict:\n```json\n{"valid": false, "reason": "The user invented patient 123."}\n```', False,
     "The user invented patient 123."),
    ("The conversation seems fine.", True, "unreadable"),
])
def test_validate_conversation(user_server, answer, valid, reason):
    user_server.text(answer, usage=(500, 40))
    conversation = [{"role": "user", "content": "Hi, a question about costs."},
                    {"role": "verifier", "ok": False, "draft": "x", "content": "secret verifier note"},
                    {"role": "agent", "content": "The cost is 24.5."},
                    {"role": "user", "content": "Thanks.", "stopped": True}]

    validation = validate_conversation(_model(user_server, "validator"), INSTRUCTION, conversation)

    assert validation.valid is valid and reason in validation.reason and validation.usage == Usage(500, 40)
    [body] = user_server.bodies()
    assert body["temperature"] == 0.0
    request = body["messages"][-1]["content"]
    assert INSTRUCTION in request and "USER: Hi, a question about costs." in request
    assert "DB AGENT: The cost is 24.5." in request and f"USER: Thanks. {STOP_TOKEN}" in request
    assert "secret verifier note" not in request


def test_endpoint_errors_raise_chat_error(user_server, verifier_server):
    user_server.error(500, "user model down")
    with pytest.raises(ChatError, match="user model down"):
        _user(user_server, verifier_server).start()

    user_server.text("Hi.")
    verifier_server.error(503, "verifier down")
    with pytest.raises(ChatError, match="verifier down"):
        _user(user_server, verifier_server).start()

    user_server.error(500, "validator down")
    with pytest.raises(ChatError, match="validator down"):
        validate_conversation(_model(user_server, "validator"), INSTRUCTION, [])
