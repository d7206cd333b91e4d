"""Tool calling through the real openai and google-genai SDKs against local HTTP servers with scripted replies
(tests/llm_servers.py): parsing of calls and usage, what the client sends, bad calls as counted errors, the SDKs'
retries and timeouts surfacing as ChatError, and cost accounting."""

from __future__ import annotations

import json
import time

import pytest

from ehrbench.llm.chat import ChatError, OpenAIChat
from ehrbench.llm.gemini_tools import GeminiToolChat, gemini_contents
from ehrbench.llm.openai_tools import OpenAIToolChat
from ehrbench.llm.prices import cost_usd
from ehrbench.llm.tool_chat import ChatTurn, ToolSpec, Usage, assistant_message, tool_result_message
from ehrbench.llm.tools import tool_chat_model
from tests.llm_servers import GeminiServer, OpenAIServer, Reply

pytestmark = pytest.mark.integration

SQL = ToolSpec("sql_execute", "Run a read-only SQL query and return up to k rows.",
               {"type": "object", "properties": {"query": {"type": "string"}, "k": {"type": "integer"}},
                "required": ["query"]})
TABLES = ToolSpec("table_search", "List the tables.")
TOOLS = [SQL, TABLES]
QUESTION = [{"role": "system", "content": "You answer questions over an EHR database."},
            {"role": "user", "content": "How many patients are there?"}]


@pytest.fixture
def openai_server():
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def gemini_server():
    with GeminiServer() as server:
        yield server


def _openai(server: OpenAIServer, **kwargs) -> OpenAIToolChat:
    options = {"timeout_s": 5, "max_retries": 1} | kwargs
    return tool_chat_model(f"openai:scripted-llama@{server.base_url}", **options)


def _gemini(server: GeminiServer, model: str = "gemini-2.5-flash", **kwargs) -> GeminiToolChat:
    options = {"timeout_s": 5, "max_retries": 1, "initial_backoff_s": 0.05} | kwargs
    return GeminiToolChat(model, api_key="test-key", base_url=server.base_url, **options)


# --- OpenAI-compatible ---------------------------------------------------------------------------------------------

def test_openai_tool_call_is_parsed_and_its_result_round_trips(openai_server):
    openai_server.tool_call("sql_execute", '{"query": "select count(*) from patients", "k": 5}', usage=(120, 30))
    openai_server.text("There are 100 patients.", usage=(160, 8))
    model = _openai(openai_server)

    turn = model.chat(QUESTION, TOOLS, temperature=0.0, max_tokens=256)

    assert isinstance(turn, ChatTurn) and turn.text is None and turn.finish_reason == "tool_calls"
    [call] = turn.tool_calls
    assert call.id == "call_1_0" and call.name == "sql_execute" and call.error is None
    assert call.arguments == {"query": "select count(*) from patients", "k": 5}
    assert turn.usage == Usage(120, 30) and turn.latency_s > 0

    history = [*QUESTION, assistant_message(turn), tool_result_message(call, '[{"count": 100}]')]
    final = model.chat(history, TOOLS)
    assert final.text == "There are 100 patients." and final.tool_calls == [] and final.finish_reason == "stop"
    assert final.usage == Usage(160, 8)

    first, second = openai_server.bodies()
    assert first["model"] == "scripted-llama" and first["temperature"] == 0.0 and first["max_tokens"] == 256
    assert first["tools"] == [{"type": "function", "function": {"name": "sql_execute", "description": SQL.description,
                                                                "parameters": SQL.parameters}},
                              {"type": "function", "function": {"name": "table_search",
                                                                "description": TABLES.description,
                                                                "parameters": TABLES.parameters}}]
    assert first["messages"] == QUESTION
    assert second["messages"][2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1_0", "type": "function",
         "function": {"name": "sql_execute", "arguments": '{"query": "select count(*) from patients", "k": 5}'}}]}
    assert second["messages"][3] == {"role": "tool", "tool_call_id": "call_1_0", "content": '[{"count": 100}]'}


def test_openai_bad_tool_calls_are_errors_not_exceptions(openai_server):
    openai_server.tool_calls(("sql_execute", '{"query": "select 1"'),  # truncated JSON
                             ("sql_execute", '["select 1"]'),  # not an object
                             ("drop_database", "{}"),  # no such tool
                             ("sql_execute", '{"k": 3}'),  # required argument missing
                             ("table_search", ""))  # empty arguments: a call without parameters
    turn = _openai(openai_server).chat(QUESTION, TOOLS)

    malformed, not_object, unknown, missing, no_args = turn.tool_calls
    assert malformed.arguments is None and malformed.raw_arguments == '{"query": "select 1"'
    assert "not valid JSON" in malformed.error
    assert not_object.arguments is None and "must be a JSON object" in not_object.error
    assert "no tool named 'drop_database'" in unknown.error and "sql_execute, table_search" in unknown.error
    assert "missing required argument(s): query" in missing.error
    assert no_args.error is None and no_args.arguments == {}
    assert turn.tool_errors == 4


def test_openai_rate_limit_is_retried_by_the_sdk(openai_server):
    openai_server.error(429, "slow down")
    openai_server.text("fine")
    turn = _openai(openai_server).chat(QUESTION, TOOLS)
    assert turn.text == "fine"
    assert len(openai_server.requests) == 2 and openai_server.requests[0].body == openai_server.requests[1].body


def test_openai_server_errors_raise_chat_error_after_the_retries(openai_server):
    openai_server.error(500, "the GPU caught fire")
    openai_server.error(500, "the GPU caught fire")
    with pytest.raises(ChatError, match=r"openai:scripted-llama@http://127\.0\.0\.1:\d+/v1: .*500.*GPU caught fire"):
        _openai(openai_server, max_retries=1).chat(QUESTION, TOOLS)
    assert len(openai_server.requests) == 2  # one request and one retry


def test_openai_timeout_raises_chat_error_naming_the_timeout(openai_server):
    openai_server.delay(2.0)
    openai_server.delay(2.0)
    start = time.perf_counter()
    with pytest.raises(ChatError, match=r"openai:scripted-llama@.*timed out after 0\.5 s"):
        _openai(openai_server, timeout_s=0.5, max_retries=1).chat(QUESTION, TOOLS)
    assert time.perf_counter() - start < 4
    assert len(openai_server.requests) == 2


HTML_PAGE = "<html><head><title>502 Bad Gateway</title></head>\n<body><h1>502 Bad Gateway</h1></body></html>"


@pytest.mark.parametrize(("body", "content_type", "detail"), [
    (HTML_PAGE, "text/html", "the reply is not JSON: '<html><head><title>502 Bad Gateway</title></head> <body>"),
    ('{"error": "truncated', "application/json", "the reply is not valid JSON (Unterminated string"),
    ('{"object": "list", "data": []}', "application/json", "the reply does not have the API's shape"),
    ('{"choices": [{"index": 0, "message": {"content": 42}}]}', "application/json",
     "the reply does not have the API's shape (TypeError: the message content is int, not text)"),
])
@pytest.mark.parametrize("client", ["tool chat", "chat"])
def test_openai_unreadable_replies_are_chat_errors_naming_the_endpoint(openai_server, body, content_type, detail,
                                                                       client):
    openai_server.raw(body, content_type)
    with pytest.raises(ChatError) as raised:
        if client == "chat":
            OpenAIChat("scripted-llama", base_url=openai_server.base_url, max_retries=0).complete(QUESTION,
                                                                                                  temperature=0.0)
        else:
            _openai(openai_server).chat(QUESTION, TOOLS)
    assert str(raised.value).startswith(f"openai:scripted-llama@{openai_server.base_url}: unreadable reply: {detail}")
    assert not raised.value.transient and len(openai_server.requests) == 1


def test_openai_missing_usage_counts_zero_and_a_tool_looping_model_keeps_answering(openai_server):
    openai_server.forever(Reply(tool_calls=(("table_search", "{}"),), usage=None))
    model = _openai(openai_server)
    turns = [model.chat(QUESTION, TOOLS) for _ in range(3)]
    assert all(t.usage == Usage(0, 0) and [c.name for c in t.tool_calls] == ["table_search"] for t in turns)
    assert len(openai_server.requests) == 3


def test_cost_from_the_price_table():
    usage = Usage(1_000_000, 100_000)
    assert cost_usd("gpt-4o", usage) == pytest.approx(2.50 + 1.00)
    assert cost_usd("gpt-4o-mini-2024-07-18", usage) == pytest.approx(0.15 + 0.06)  # longest prefix, not gpt-4o
    assert cost_usd("models/gemini-2.5-flash", usage) == pytest.approx(0.30 + 0.25)
    assert cost_usd("gemini-2.5-flash-lite", usage) == pytest.approx(0.10 + 0.04)
    assert cost_usd("scripted-llama", usage) is None and cost_usd("gpt-4omni", usage) is None


# --- Gemini --------------------------------------------------------------------------------------------------------

def test_gemini_tool_call_is_parsed_and_its_result_round_trips(gemini_server):
    gemini_server.tool_call("sql_execute", {"query": "select count(*) from patients"}, usage=(90, 12))
    gemini_server.text("There are 100 patients.", usage=(130, 7))
    model = _gemini(gemini_server)

    turn = model.chat(QUESTION, TOOLS, temperature=0.2, max_tokens=128)

    [call] = turn.tool_calls
    assert call.name == "sql_execute" and call.arguments == {"query": "select count(*) from patients"}
    assert call.error is None and call.id and turn.text is None and turn.finish_reason == "STOP"
    assert turn.usage == Usage(90, 12)
    assert cost_usd(model.model, turn.usage) == pytest.approx((90 * 0.30 + 12 * 2.50) / 1e6)

    history = [*QUESTION, assistant_message(turn), tool_result_message(call, '[{"count": 100}]')]
    final = model.chat(history, TOOLS)
    assert final.text == "There are 100 patients." and final.tool_calls == [] and final.usage == Usage(130, 7)

    first, second = gemini_server.requests
    assert GeminiServer.model_of(first) == "gemini-2.5-flash"
    body = first.body
    assert body["systemInstruction"]["parts"] == [{"text": "You answer questions over an EHR database."}]
    assert body["contents"] == [{"role": "user", "parts": [{"text": "How many patients are there?"}]}]
    assert body["generationConfig"]["temperature"] == 0.2 and body["generationConfig"]["maxOutputTokens"] == 128
    declarations = body["tools"][0]["functionDeclarations"]
    # google-genai 3.x writes this field in snake case; Gemini's proto JSON parser takes either spelling
    schemas = [d.get("parametersJsonSchema", d.get("parameters_json_schema")) for d in declarations]
    assert [d["name"] for d in declarations] == ["sql_execute", "table_search"]
    assert schemas == [SQL.parameters, TABLES.parameters]
    model_turn, tool_turn = second.body["contents"][1:]
    assert model_turn["role"] == "model"
    assert model_turn["parts"][0]["functionCall"]["name"] == "sql_execute"
    assert model_turn["parts"][0]["functionCall"]["args"] == {"query": "select count(*) from patients"}
    assert tool_turn["role"] == "user"
    assert tool_turn["parts"][0]["functionResponse"]["name"] == "sql_execute"
    assert tool_turn["parts"][0]["functionResponse"]["response"] == {"result": '[{"count": 100}]'}


def test_gemini_unknown_tool_and_missing_argument_are_errors(gemini_server):
    gemini_server.tool_calls(("drop_database", {}), ("sql_execute", {"k": 1}))
    turn = _gemini(gemini_server).chat(QUESTION, TOOLS)
    unknown, missing = turn.tool_calls
    assert "no tool named 'drop_database'" in unknown.error and "missing required" in missing.error
    assert turn.tool_errors == 2


def test_gemini_rate_limit_is_retried(gemini_server):
    gemini_server.error(429, "quota")
    gemini_server.text("fine")
    assert _gemini(gemini_server).chat(QUESTION, TOOLS).text == "fine"
    assert len(gemini_server.requests) == 2


def test_gemini_server_errors_raise_chat_error_after_the_retries(gemini_server):
    gemini_server.error(503, "overloaded")
    gemini_server.error(503, "overloaded")
    with pytest.raises(ChatError, match=r"gemini:gemini-2\.5-flash@http://127\.0\.0\.1:\d+: 503.*overloaded"):
        _gemini(gemini_server).chat(QUESTION, TOOLS)
    assert len(gemini_server.requests) == 2


def test_gemini_timeout_raises_chat_error_naming_the_timeout(gemini_server):
    gemini_server.delay(2.0)
    gemini_server.delay(2.0)
    with pytest.raises(ChatError, match=r"gemini:gemini-2\.5-flash@.*timed out after 0\.5 s"):
        _gemini(gemini_server, timeout_s=0.5).chat(QUESTION, TOOLS)
    assert len(gemini_server.requests) == 2


def test_gemini_html_reply_is_a_chat_error_naming_the_endpoint(gemini_server):
    gemini_server.raw(HTML_PAGE)
    with pytest.raises(ChatError) as raised:
        _gemini(gemini_server).chat(QUESTION, TOOLS)
    assert str(raised.value) == (
        f"gemini:gemini-2.5-flash@{gemini_server.base_url}: unreadable reply: the reply is not valid JSON (Expecting "
        "value at position 0): '<html><head><title>502 Bad Gateway</title></head> <body><h1>502 Bad Gateway</h1>"
        "</body></html>'")


def test_gemini_conversion_merges_tool_results_and_keeps_thought_signatures():
    history = [*QUESTION,
               {"role": "assistant", "content": "Let me look.", "tool_calls": [
                   {"id": "a", "type": "function", "function": {"name": "table_search", "arguments": ""},
                    "extra_content": {"google": {"thought_signature": "c2lnbmF0dXJl"}}},
                   {"id": "b", "type": "function", "function": {"name": "sql_execute", "arguments": '{"query'}}]},
               {"role": "tool", "tool_call_id": "a", "content": '{"tables": ["patients"]}'},
               {"role": "tool", "tool_call_id": "b", "content": "error: not valid JSON"}]
    system, contents = gemini_contents(history)
    assert system == "You answer questions over an EHR database."
    assert [c.role for c in contents] == ["user", "model", "user"]
    text, first_call, second_call = contents[1].parts
    assert text.text == "Let me look." and first_call.thought_signature == b"signature"
    assert first_call.function_call.args == {} and second_call.function_call.args == {"raw_arguments": '{"query'}
    responses = [part.function_response for part in contents[2].parts]
    assert [(r.name, r.id, r.response) for r in responses] == [
        ("table_search", "a", {"tables": ["patients"]}), ("sql_execute", "b", {"result": "error: not valid JSON"})]
    assert json.loads(json.dumps(assistant_message(ChatTurn("x", [], Usage(), None, 0.0)))) == {
        "role": "assistant", "content": "x"}
