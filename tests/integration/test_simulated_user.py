"""The chatqa simulated user and its validator against real local chat-completions servers with scripted replies
(tests/llm_servers.py): what each model is sent (role swap, temperatures, the verifier's feedback in a reflection,
earlier runs' mistakes in a re-run), how verdicts are read, when the conversation stops, usage accounting and
endpoint failures. The validator follows EHR-ChatQA's (validator.py `user_validator`): it reads the instruction, the
conversation and the gold SQL and answers explanation / broken_rule / evidence / result."""

from __future__ import annotations

import pytest

from ehrbench.agents.simulated_user import STOP_TOKEN, VALIDATOR_PROMPT, SimulatedUser, validate_conversation
from ehrbench.llm.chat import ChatError
from ehrbench.llm.openai_tools import OpenAIToolChat
from ehrbench.llm.tool_chat import Usage
from tests.llm_servers import OpenAIServer

pytestmark = pytest.mark.integration

INSTRUCTION = ("You are looking for information about hospital costs. Specifically, you want to know: What is the "
               "cost of diagnosing high potassium? Step by step, you tell the DB agent: (1) the diagnosis is high "
               "potassium.")
ACCEPT = '{"ok": true, "feedback": ""}'
GOLD_SQL = "SELECT DISTINCT cost FROM cost WHERE event_type = 'diagnosis' AND event_id IN (...)"


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


def test_by_default_a_draft_gets_the_published_three_reflections(user_server, verifier_server):
    # EHR-ChatQA's ReflectionUser: reflection_max_attempts = 3
    for draft in ("one", "two", "three", "four"):
        user_server.text(draft)
    for _ in range(3):
        verifier_server.text('{"ok": false, "feedback": "no"}')
    turn = _user(user_server, verifier_server).start()
    assert (turn.text, turn.reflections) == ("four", 3)
    assert len(user_server.requests) == 4 and len(verifier_server.requests) == 3


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


def test_a_rerun_user_is_judged_and_reflects_against_the_earlier_runs_mistakes(user_server, verifier_server):
    # EHR-ChatQA re-runs a conversation its validator rejected with the validator's explanations as "previous user
    # mistakes", which its verifier and reflection read; the user's own prompt does not get them
    mistakes = ["The user gave the diagnosis before the DB agent asked.", "The user ended without double-checking."]
    user_server.text("Hi, what does it cost to diagnose high potassium?")
    user_server.text("Hi, I have a question about hospital costs.")
    verifier_server.text('{"ok": false, "feedback": "Too specific for an opening."}')
    verifier_server.text(ACCEPT)
    user = _user(user_server, verifier_server, previous_mistakes=mistakes)

    assert user.start().text == "Hi, I have a question about hospital costs."

    first, reflection = user_server.bodies()
    assert not any("double-checking" in m["content"] for m in first["messages"])  # not in the user's prompt
    assert reflection["messages"][-1]["content"] == (
        "[Note for you only, not from the DB agent: a reviewer checked your draft above against your instruction "
        "and the rules and sent it back: Too specific for an opening.\nMistakes made in earlier runs of this "
        "conversation, not to repeat:\n1. The user gave the diagnosis before the DB agent asked.\n2. The user "
        "ended without double-checking.\nWrite your message again, fixing this. Reply with the message only.]")
    for body in verifier_server.bodies():
        assert ("<previous_mistakes>\n1. The user gave the diagnosis before the DB agent asked.\n2. The user ended "
                "without double-checking.\n</previous_mistakes>") in body["messages"][-1]["content"]


def test_a_first_run_user_has_no_mistakes_to_carry(user_server, verifier_server):
    user_server.text("Hi, I have a question.")
    verifier_server.text(ACCEPT)
    _user(user_server, verifier_server, previous_mistakes=["", "  "]).start()
    assert "previous_mistakes" not in verifier_server.bodies()[0]["messages"][-1]["content"]


CONVERSATION = [{"role": "user", "content": "Hi, a question about costs."},
                {"role": "verifier", "ok": False, "draft": "x", "content": "secret verifier note"},
                {"role": "agent", "content": "The cost is 24.5."},
                {"role": "user", "content": "Thanks.", "stopped": True}]


@pytest.mark.parametrize(("answer", "valid", "reason", "broken_rule", "evidence"), [
    ('{"explanation": "The user followed the instruction.", "broken_rule": "", "evidence": "", '
     '"result": "no_error"}', True, "The user followed the instruction.", "", ""),
    ('Here is my verdict:\n```json\n{"explanation": "The user never said it was about diagnoses, a predicate of '
     'the gold SQL.", "broken_rule": "Give every condition of the gold SQL.", "evidence": "Thanks.", '
     '"result": "USER_ERROR"}\n```', False, "The user never said it was about diagnoses, a predicate of the gold SQL.",
     "Give every condition of the gold SQL.", "Thanks."),
    ('{"valid": false, "reason": "an answer in another format"}', True, "unreadable", "", ""),
    ("The conversation seems fine.", True, "unreadable", "", ""),
])
def test_validate_conversation_reads_the_gold_sql_and_answers_as_published(user_server, answer, valid, reason,
                                                                           broken_rule, evidence):
    user_server.text(answer, usage=(500, 40))

    validation = validate_conversation(_model(user_server, "validator"), INSTRUCTION, CONVERSATION, GOLD_SQL)

    assert validation.valid is valid and reason in validation.reason and validation.usage == Usage(500, 40)
    assert (validation.broken_rule, validation.evidence) == (broken_rule, evidence)
    [body] = user_server.bodies()
    assert body["temperature"] == 0.0 and body["messages"][0] == {"role": "system", "content": VALIDATOR_PROMPT}
    request = body["messages"][-1]["content"]
    assert request == (f"<instruction>\n{INSTRUCTION}\n</instruction>\n\n<conversation>\n"
                       f"USER: Hi, a question about costs.\n\nDB AGENT: The cost is 24.5.\n\nUSER: Thanks. "
                       f"{STOP_TOKEN}\n</conversation>\n\n<gold_sql>\n{GOLD_SQL}\n</gold_sql>")
    assert "secret verifier note" not in request


def test_the_validator_prompt_asks_for_the_published_fields_and_gold_sql_checks():
    for field in ('"explanation"', '"broken_rule"', '"evidence"', '"result"', '"user_error"', '"no_error"'):
        assert field in VALIDATOR_PROMPT
    assert "the gold SQL's predicates" in VALIDATOR_PROMPT and "the gold SQL uses" in VALIDATOR_PROMPT


def test_without_gold_sql_the_validator_is_told_so(user_server):
    user_server.text('{"explanation": "fine", "broken_rule": "", "evidence": "", "result": "no_error"}')
    assert validate_conversation(_model(user_server, "validator"), INSTRUCTION, CONVERSATION).valid
    assert user_server.bodies()[0]["messages"][-1]["content"].endswith("<gold_sql>\n(not given)\n</gold_sql>")


@pytest.mark.parametrize("conversation, out_of_actions, reason", [
    (CONVERSATION, True, "The DB agent spent its whole action budget"),
    ([{"role": "user", "content": "Hi."}, {"role": "agent", "content": " "}, {"role": "user", "content": "Hello?"}],
     False, "The DB agent sent an empty message"),
])
def test_the_agents_own_failures_are_no_user_error_without_a_model_call(user_server, conversation, out_of_actions,
                                                                          reason):
    # EHR-ChatQA's validator returns no_error at once when the agent hit its turn limit or sent an empty message
    validation = validate_conversation(_model(user_server, "validator"), INSTRUCTION, conversation, GOLD_SQL,
                                       agent_out_of_actions=out_of_actions)
    assert validation.valid and validation.reason.startswith(reason) and validation.usage == Usage()
    assert user_server.requests == []


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
        validate_conversation(_model(user_server, "validator"), INSTRUCTION, [], GOLD_SQL)
