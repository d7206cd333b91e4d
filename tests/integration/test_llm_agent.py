"""The LLM agent end to end over a real local HTTP model server (tests/llm_servers.py) and tiny hand-made data: each
suite's prompts and tools, the ReAct loop's budget and error handling, the simulated user and its validator, and
run_trial's scoring and its handling of endpoint failures. Expected rows, tokens and scores are worked out by hand in
the comments."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import json
import sqlite3
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ehrbench.agents.config import parse_agent
from ehrbench.agents.llm_agent import LlmAgent
from ehrbench.agents.llm_agent.dq import load_audit_tables
from ehrbench.agents.llm_agent.ehrsql import extract_sql
from ehrbench.agents.simulated_user import STOP_TOKEN, USER_SYSTEM_PROMPT, VALIDATOR_PROMPT, VERIFIER_PROMPT
from ehrbench.agents.tools.web_search import HttpSearchProvider, WebSearchError
from ehrbench.dq.tasks import LABEL_SCHEMA
from ehrbench.evaluation.trial import TransientTrialError, run_trial
from ehrbench.llm.chat import ChatError
from ehrbench.llm.tools import tool_chat_model
from ehrbench.tasks import EvalTask, Gold, TaskView
from tests.fhir_fakes import write_resources_db
from tests.llm_servers import OpenAIServer, Reply, Request

pytestmark = pytest.mark.integration

# EHR-ChatQA's tools in the published order (src/envs/<db>_star/env.py); web_search only with a provider
DATABASE_TOOLS = ["table_search", "column_search", "sql_execute", "value_substring_search",
                  "value_similarity_search"]
ALL_PATIENTS = "select subject_id, alive from patients order by subject_id"  # -> [[1, 1], [2, 0], [3, 1]]


# --- fixtures --------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def database(tmp_path_factory) -> Path:
    """Two tables: three patients (a boolean column) and their labs."""
    path = tmp_path_factory.mktemp("agent-db") / "ehr.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("create table patients (subject_id integer, gender varchar, alive boolean)")
        con.execute("insert into patients values (1, 'f', true), (2, 'm', false), (3, 'f', true)")
        con.execute("create table labs (subject_id integer, label varchar, value double)")
        con.execute("insert into labs values (1, 'potassium', 4.1), (1, 'sodium', 140), (3, 'potassium', 5.6)")
    return path


@pytest.fixture
def server():
    with OpenAIServer() as server:
        yield server


def make_agent(server: OpenAIServer, model: str = "scripted", **options) -> LlmAgent:
    return LlmAgent(parse_agent(f"llm:{model}@{server.base_url}", {"max_retries": 0, "timeout_s": 5, **options}))


def ehrsql_view(database: Path, question: str = "Which patients are alive?") -> TaskView:
    return TaskView("ehrsql", "q1", "mimic_iv", question, context="Assume the current time is 2100-12-31 23:59:00.",
                    database=database)


def tool_names(body: dict) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


def tool_results(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


# --- ehrsql, tools mode ----------------------------------------------------------------------------------------------

def test_tools_mode_explores_then_submits_sql_whose_rows_are_the_answer(server, database):
    server.tool_call("table_search", "{}", usage=(100, 20))
    server.tool_call("submit_answer", {"sql": ALL_PATIENTS + ";"}, usage=(150, 30))

    answer = make_agent(server).run(ehrsql_view(database))

    assert answer.answer_rows == [[1, 1], [2, 0], [3, 1]]  # the harness ran the SQL; booleans as 0/1
    assert answer.sql == ALL_PATIENTS + ";" and not answer.abstained
    assert (answer.tool_calls, answer.tool_errors, answer.stop_reason) == (2, 0, "finished")
    assert (answer.input_tokens, answer.output_tokens) == (250, 50)  # 100 + 150, 20 + 30
    assert answer.cost_usd is None  # "scripted" has no list price
    assert answer.model == f"openai:scripted@{server.base_url}"

    first, second = server.bodies()  # two model calls, no more
    assert tool_names(first) == [*DATABASE_TOOLS, "submit_answer", "abstain"]
    assert first["model"] == "scripted" and first["temperature"] == 0.0
    assert "DuckDB" in first["messages"][0]["content"]
    assert "Assume the current time is 2100-12-31 23:59:00." in first["messages"][0]["content"]
    assert first["messages"][1] == {"role": "user", "content": "Which patients are alive?"}
    assert tool_results(second) == ["labs, patients"]  # published table_search: names joined by ", "
    assert (answer.value_search, answer.web_search) == ("lexical", "disabled")
    assert answer.transcript[-1]["content"] == "Answer recorded."


@pytest.mark.parametrize("protocol, rows", [
    (None, [["now"]]),  # a generated question: the SQL runs as written
    ("ehrsql2024", [["2100-12-31 23:59:00"]]),  # scoring.py's post_process_sql: 'now' is the current time
])
def test_an_imported_tasks_sql_runs_as_its_published_scorer_runs_a_prediction(server, database, protocol, rows):
    server.tool_call("submit_answer", {"sql": "SELECT 'now'"})
    view = dataclasses.replace(ehrsql_view(database), protocol=protocol, current_time="2100-12-31 23:59:00")
    answer = make_agent(server).run(view)
    assert answer.answer_rows == rows and answer.sql == "SELECT 'now'"  # the agent's own SQL is kept


def test_a_priced_model_is_costed_from_the_summed_tokens(server, database):
    server.tool_call("sql_execute", {"query": "select 1"}, usage=(600_000, 40_000))
    server.tool_call("submit_answer", {"sql": "select count(*) from patients"}, usage=(400_000, 60_000))
    answer = make_agent(server, model="gpt-4o").run(ehrsql_view(database))
    assert answer.answer_rows == [[3]]
    # gpt-4o: $2.50 per million input tokens, $10 per million output: 1M -> 2.50, 100k -> 1.00
    assert answer.cost_usd == pytest.approx(3.50)


def test_abstain_ends_the_trial_as_an_abstention(server, database):
    server.tool_call("abstain", {"reason": "the records hold no weather"})
    answer = make_agent(server).run(ehrsql_view(database, "Will it rain tomorrow?"))
    assert answer.abstained and answer.answer_rows is None and answer.sql is None
    assert (answer.tool_calls, answer.stop_reason) == (1, "finished")
    assert len(server.requests) == 1


def test_a_failing_submitted_sql_is_answered_with_the_error_and_can_be_resubmitted(server, database):
    server.tool_call("submit_answer", {"sql": "select alive from patient"})  # no such table
    server.tool_call("submit_answer", {"sql": "select count(*) from patients where alive"})

    answer = make_agent(server).run(ehrsql_view(database))

    [error] = tool_results(server.bodies()[1])
    assert error.startswith("Error: the SQL failed, nothing was recorded: ") and "patient" in error
    assert answer.answer_rows == [[2]] and answer.sql == "select count(*) from patients where alive"
    assert (answer.tool_calls, answer.tool_errors, answer.stop_reason) == (2, 0, "finished")  # not malformed


def test_a_malformed_tool_call_is_answered_with_the_error_and_counted(server, database):
    server.tool_call("submit_answer", '{"sql": ')  # truncated JSON
    server.tool_call("submit_answer", {"sql": "select 1 as one"})

    answer = make_agent(server).run(ehrsql_view(database))

    [error] = tool_results(server.bodies()[1])
    assert error.startswith("Error: the arguments of 'submit_answer' are not valid JSON")
    assert (answer.tool_calls, answer.tool_errors) == (2, 1)
    assert answer.answer_rows == [[1]] and answer.stop_reason == "finished"


def test_a_model_that_never_stops_calling_tools_ends_at_the_action_budget(server, database):
    server.forever(Reply(tool_calls=(("table_search", "{}"),)))
    answer = make_agent(server, max_actions=5).run(ehrsql_view(database))
    assert (answer.stop_reason, answer.tool_calls) == ("max_actions", 5)
    assert len(server.requests) == 5  # one call per turn: five turns, then no sixth request
    assert answer.answer_rows is None and not answer.abstained
    assert (answer.input_tokens, answer.output_tokens) == (50, 25)


def test_calls_beyond_the_budget_in_one_turn_are_not_run(server, database):
    server.tool_calls(("table_search", "{}"), ("table_search", "{}"), ("table_search", "{}"))  # actions 1-3
    server.tool_calls(("sql_execute", {"query": "select 1"}), ("sql_execute", {"query": "select 2"}),  # 4-5
                      ("submit_answer", {"sql": "select 3"}))  # over the budget

    answer = make_agent(server, max_actions=5).run(ehrsql_view(database))

    assert len(server.requests) == 2
    assert (answer.stop_reason, answer.tool_calls) == ("max_actions", 5)
    assert answer.answer_rows is None and answer.sql is None  # the submission never ran
    results = [m["content"] for m in answer.transcript if m["role"] == "tool"]
    assert results[3:] == ["[(1,)]", "[(2,)]", "Not run: the budget of 5 actions is spent."]


def test_an_abstention_beyond_the_budget_is_not_an_abstention(server, database):
    server.tool_call("table_search", "{}")
    server.tool_calls(("sql_execute", {"query": "select 1"}), ("abstain", {"reason": "unsure"}))
    answer = make_agent(server, max_actions=2).run(ehrsql_view(database))
    assert answer.transcript[-1]["content"] == "Not run: the budget of 2 actions is spent."
    assert answer.stop_reason == "max_actions"
    assert not answer.abstained


def test_text_without_a_tool_call_gets_one_nudge_then_the_loop_ends(server, database):
    server.text("I think the answer is three.")
    server.text("Yes, three.")
    answer = make_agent(server).run(ehrsql_view(database))
    assert (answer.stop_reason, answer.tool_calls) == ("text", 0)
    assert len(server.requests) == 2
    assert server.bodies()[1]["messages"][-1] == {
        "role": "user", "content": "Finish the task with one of your tools (submit_answer, abstain)."}
    assert answer.answer_rows is None and not answer.abstained


def test_a_nudged_model_can_still_finish(server, database):
    server.text("Three patients.")
    server.tool_call("submit_answer", {"sql": "select count(*) from patients"})
    answer = make_agent(server).run(ehrsql_view(database))
    assert (answer.stop_reason, answer.answer_rows, answer.tool_calls) == ("finished", [[3]], 1)


# --- ehrsql, single turn -------------------------------------------------------------------------------------------

def test_single_turn_runs_the_sql_block_of_the_reply(server, database):
    server.text("Here it is:\n```sql\nselect count(*) from labs where label = 'potassium';\n```\nDone.",
                usage=(300, 12))
    answer = make_agent(server, ehrsql_mode="single_turn").run(ehrsql_view(database, "How many potassium labs?"))

    assert answer.sql == "select count(*) from labs where label = 'potassium'" and answer.answer_rows == [[2]]
    assert (answer.input_tokens, answer.output_tokens, answer.tool_calls) == (300, 12, 0)
    assert (answer.value_search, answer.web_search) == (None, "disabled")  # no value search offered
    [body] = server.bodies()
    assert "tools" not in body  # one plain reply, no tools
    system = body["messages"][0]["content"]
    assert "labs(subject_id INTEGER, label VARCHAR, value DOUBLE)" in system
    assert "patients(subject_id INTEGER, gender VARCHAR, alive BOOLEAN)" in system


def test_single_turn_on_sqlite_gives_the_schema_and_runs_the_reply(server, tmp_path):
    # the schema came from pragma_table_info(), which the SQL sandbox refuses: every SQLite single-turn trial failed
    path = tmp_path / "ehr.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("create table patients (subject_id INT, gender TEXT)")
        con.execute("create table admissions (hadm_id INT, subject_id INT, admittime TEXT)")
        con.execute("insert into patients values (1, 'f'), (2, 'm')")
    con.close()
    server.text("```sql\nselect count(*) from patients\n```")
    answer = make_agent(server, ehrsql_mode="single_turn").run(ehrsql_view(path))

    assert answer.answer_rows == [[2]] and answer.sql == "select count(*) from patients"
    system = server.bodies()[0]["messages"][0]["content"]
    assert "admissions(hadm_id INT, subject_id INT, admittime TEXT)\npatients(subject_id INT, gender TEXT)" in system


def test_single_turn_null_is_an_abstention_and_failing_sql_no_answer(server, database):
    server.text("null")
    server.text("select nothing from nowhere")
    agent = make_agent(server, ehrsql_mode="single_turn")

    abstained = agent.run(ehrsql_view(database))
    assert abstained.abstained and abstained.sql is None and abstained.answer_rows is None

    failed = agent.run(ehrsql_view(database))
    assert not failed.abstained and failed.sql == "select nothing from nowhere" and failed.answer_rows is None
    assert failed.transcript[-1]["role"] == "harness"
    assert failed.transcript[-1]["content"].startswith("the SQL failed: ")


@pytest.mark.parametrize("text, sql", [
    ("```sql\nSELECT 1;\n```", "SELECT 1"),
    ("Sure.\n```SQL\nselect a\nfrom t\n```\nand ```sql\nselect 2\n```", "select a\nfrom t"),  # the first block
    ("```\nselect 2\n```", "select 2"),  # a fence without a language
    ("  select 3 ;  ", "select 3"),  # no fence: the whole reply
    ("null", None),
    ("NULL", None),
    ("'null'", None),
    ('"null";', None),
    ("```sql\nnull\n```", None),
    ("", None),
    ("   ", None),
])
def test_extract_sql(text, sql):
    assert extract_sql(text) == sql


# --- chatqa ----------------------------------------------------------------------------------------------------------

CHATQA_INSTRUCTION = "You want the number of patients in the database."


GOLD_SQL = "select count(*) from patients"
NO_ERROR = '{"explanation": "The user followed the rules.", "broken_rule": "", "evidence": "", "result": "no_error"}'


def user_error(explanation: str) -> str:
    return json.dumps({"explanation": explanation, "broken_rule": "Reveal details gradually.",
                       "evidence": "Hi, I need a patient count.", "result": "user_error"})


class ChatPolicy:
    """Every role of a chatqa trial, told apart by the system prompt: the user opens, then stops once the agent has
    told it a result (`user_stops` False: it keeps asking); the verifier accepts; the validator answers the next of
    `verdicts` (then no_error); the agent runs its SQL with sql_execute (or first answers `first`), then tells the
    user `reply` (or, `endless`, calls table_search for ever; `chatty`, only talks). Requests are kept by role."""

    def __init__(self, verdicts: list[str] | None = None, endless: bool = False, chatty: bool = False,
                 user_stops: bool = True, reply: str = "There are 3 patients in the database: <answer>3</answer>.",
                 first: Reply | None = None):
        self.verdicts = list(verdicts or [])
        self.endless, self.chatty, self.user_stops, self.reply, self.first = endless, chatty, user_stops, reply, first
        self.roles: list[str] = []
        self.bodies: dict[str, list[dict]] = {}

    def __call__(self, request: Request) -> Reply:
        messages = request.body["messages"]
        role = self._role(messages[0]["content"])
        self.roles.append(role)
        self.bodies.setdefault(role, []).append(request.body)
        if role == "verifier":
            return Reply(text='{"ok": true, "feedback": ""}')
        if role == "validator":
            return Reply(text=self.verdicts.pop(0) if self.verdicts else NO_ERROR)
        if role == "user":
            if len(messages) <= 2 or not self.user_stops:  # the system prompt and the opening cue
                return Reply(text="Hi, I need a patient count.")
            return Reply(text=f"Thanks, that is all. {STOP_TOKEN}")
        if self.endless:
            return Reply(tool_calls=(("table_search", {}),))
        if self.chatty:
            return Reply(text="Which patients do you mean?")
        if any(m.get("tool_calls") for m in messages):
            return Reply(text=self.reply)
        return self.first or Reply(tool_calls=(("sql_execute", {"query": "select count(*) from patients"}),))

    @staticmethod
    def _role(system: str) -> str:
        if system == VERIFIER_PROMPT:
            return "verifier"
        if system == VALIDATOR_PROMPT:
            return "validator"
        if system.startswith(USER_SYSTEM_PROMPT.split("{", 1)[0]):
            return "user"
        assert system.startswith("Instruction:\n- You are a DB agent")  # EHR-ChatQA's agent instruction
        return "agent"


def chatqa_task(database: Path, task_type: str = "incre") -> EvalTask:
    return EvalTask(TaskView("chatqa", "c1", "mimic_iv", CHATQA_INSTRUCTION, database=database),
                    Gold(True, "[['3']]", GOLD_SQL, answer_rows=((3,),), task_type=task_type))


def chatqa_agent(server: OpenAIServer, task_type: str | None = "incre", **options) -> LlmAgent:
    """An agent whose harness handed it the task's gold SQL for the validator and the task's type (as make_agents
    does)."""
    config = parse_agent(f"llm:scripted@{server.base_url}", {"max_retries": 0, "timeout_s": 5, **options})
    return LlmAgent(config, validator_gold={("chatqa", "c1"): GOLD_SQL}, task_types={("chatqa", "c1"): task_type})


def test_a_conversation_follows_ehr_chatqas_published_agent_protocol(server, database, tmp_path):
    policy = ChatPolicy()
    server.respond(policy)
    agent = chatqa_agent(server)

    answer = agent.run(chatqa_task(database).view)

    # user opens (+ verifier), agent runs its SQL, agent tells the user, user stops (+ verifier), validator
    assert policy.roles == ["user", "verifier", "agent", "agent", "user", "verifier", "validator"]
    # no answer tool: the transcript is the answer (the scorer reads its sql_execute results and replies); the
    # last <answer> of the replies is shown
    assert answer.answer_rows is None and answer.sql is None and not answer.abstained
    assert (answer.answer_text, answer.free_text) == ("3", True)
    assert not answer.user_error and answer.user_turns == 2
    assert (answer.tool_calls, answer.stop_reason) == (1, "text")  # the user ended the conversation
    assert (answer.input_tokens, answer.output_tokens) == (20, 10)  # the agent's two calls only, 10 + 5 each
    assert (answer.value_search, answer.web_search) == ("lexical", "disabled")
    assert [m["role"] for m in answer.transcript] == ["system", "user", "assistant", "tool", "assistant", "user",
                                                      "harness"]
    assert answer.transcript[3]["content"] == "[(3,)]"  # EHR-ChatQA's sql_execute result form
    assert answer.transcript[5] == {"role": "user", "content": "Thanks, that is all."}  # the stop token removed
    harness = answer.transcript[-1]
    assert (harness["task_type"], harness["agent_steps"]) == ("incre", 2)
    assert harness["user_tokens"] == [50, 25]  # 2 user + 2 verifier + 1 validator calls
    assert harness["validator_had_gold_sql"] is True
    [attempt] = harness["user_attempts"]
    assert attempt["valid"] and [m["role"] for m in attempt["conversation"]] == ["user", "agent", "user"]
    assert attempt["conversation"][-1] == {"role": "user", "content": "Thanks, that is all.", "stopped": True}
    assert (attempt["validator"], attempt["previous_mistakes"]) == ("The user followed the rules.", [])

    # the agent never sees the instruction; the user does; only the validator reads the gold SQL (EHR-ChatQA's
    # user_validator is given the task's gold_sql). The agent's tools are the database tools alone; its rules are
    # the IncreQA ones
    agent_body = policy.bodies["agent"][0]
    assert agent_body["messages"][1] == {"role": "user", "content": "Hi, I need a patient count."}
    assert CHATQA_INSTRUCTION not in json.dumps(agent_body)
    assert tool_names(agent_body) == DATABASE_TOOLS
    system = agent_body["messages"][0]["content"]
    assert "evaluated based on the generated SQL queries" in system and "<answer></answer>" not in system
    assert "- Use DuckDB for SQL query generation." in system
    [validator] = policy.bodies["validator"]
    assert validator["messages"][1]["content"].endswith(f"<gold_sql>\n{GOLD_SQL}\n</gold_sql>")
    for role in ("agent", "user", "verifier"):
        assert all("<gold_sql>" not in json.dumps(body) for body in policy.bodies[role]), role

    row = run_trial(agent, chatqa_task(database), 0, "b1", tmp_path)
    assert (row["status"], row["reward"], row["correct"], row["user_turns"]) == ("completed", 1.0, True, 2)
    assert (row["protocol"], row["answer"]) == ("ehrchatqa", "3")


@pytest.mark.parametrize(("reply", "correct"), [
    ("There are 3 patients in the database: <answer>3</answer>.", True),
    ("There are <answer>three</answer> patients.", True),  # a published number word
    ("I counted them: 3 patients.", False),  # no answer tags
    ("There are <answer>3 patients</answer>.", False),  # more than the answer inside the tags
])
def test_adaptqa_is_scored_on_the_answer_tags_of_the_replies(server, database, tmp_path, reply, correct):
    policy = ChatPolicy(reply=reply)
    server.respond(policy)
    agent = chatqa_agent(server, task_type="adapt")

    row = run_trial(agent, chatqa_task(database, "adapt"), 0, "b1", tmp_path)

    assert (row["status"], row["correct"]) == ("completed", correct)
    system = policy.bodies["agent"][0]["messages"][0]["content"]
    assert "enclose the final answer in <answer></answer> tags" in system
    assert "evaluated based on the generated SQL queries" not in system


def test_without_a_task_type_the_agent_is_given_both_grading_rules(server, database):
    policy = ChatPolicy()
    server.respond(policy)
    chatqa_agent(server, task_type=None).run(chatqa_task(database).view)
    system = policy.bodies["agent"][0]["messages"][0]["content"]
    assert "<answer></answer>" in system and "at least one SQL query (via sql_execute)" in system


def test_increqa_is_scored_on_the_sql_execute_results_not_the_reply(server, database, tmp_path):
    # the reply is wrong and untagged: IncreQA reads only the results of sql_execute (one of them holds 3)
    server.respond(ChatPolicy(reply="There are 4 patients."))
    row = run_trial(chatqa_agent(server), chatqa_task(database), 0, "b1", tmp_path)
    assert (row["status"], row["correct"]) == ("completed", True)


def test_text_replies_count_against_the_action_budget(server, database, tmp_path):
    # EHR-ChatQA's agent loop: max_num_steps steps, a reply to the user being one of them; a conversation the user
    # did not end scores 0, and its validator asks no model (the agent used all its turns)
    policy = ChatPolicy([user_error("never asked")], chatty=True, user_stops=False)
    server.respond(policy)
    agent = chatqa_agent(server, max_actions=3)

    answer = agent.run(chatqa_task(database).view)

    assert answer.stop_reason == "max_actions" and not answer.user_error
    assert policy.roles.count("agent") == 3 and "validator" not in policy.roles
    assert (answer.tool_calls, answer.transcript[-1]["agent_steps"]) == (0, 3)
    row = run_trial(chatqa_agent(server, max_actions=3), chatqa_task(database), 0, "b1", tmp_path)
    assert (row["status"], row["reward"]) == ("completed", 0.0)


def test_a_turn_runs_its_first_tool_call_only(server, database):
    # the published agent asks for no parallel calls and keeps the first of a turn; text beside a call is not sent
    policy = ChatPolicy(first=Reply(text="Let me look.", tool_calls=(("sql_execute", {"query": "select 1"}),
                                                                     ("table_search", {}))))
    server.respond(policy)

    answer = chatqa_agent(server).run(chatqa_task(database).view)

    first = answer.transcript[2]
    assert first["content"] == "Let me look." and [c["function"]["name"] for c in first["tool_calls"]] == [
        "sql_execute"]
    assert answer.transcript[3] == {"role": "tool", "tool_call_id": first["tool_calls"][0]["id"],
                                    "content": "[(1,)]"}
    assert answer.tool_calls == 1 and answer.transcript[-1]["agent_steps"] == 2
    assert [m["content"] for m in answer.transcript[-1]["user_attempts"][0]["conversation"]
            if m["role"] == "agent"] == ["There are 3 patients in the database: <answer>3</answer>."]


def test_a_rejected_conversation_is_rerun_with_the_validators_explanation(server, database):
    # EHR-ChatQA (run.py): a user_error appends the validator's explanation to retry_reason, and the next run's
    # user verifier and reflection read them as "previous user mistakes"
    policy = ChatPolicy([user_error("The user asked for the count in the first message.")])
    server.respond(policy)

    answer = chatqa_agent(server).run(chatqa_task(database).view)

    assert not answer.user_error and policy.roles.count("validator") == 2 and policy.roles.count("agent") == 4
    first, second = answer.transcript[-1]["user_attempts"]
    assert (first["valid"], first["validator"], first["previous_mistakes"]) == (
        False, "The user asked for the count in the first message.", [])
    assert (first["broken_rule"], first["evidence"]) == ("Reveal details gradually.", "Hi, I need a patient count.")
    assert second["valid"] and second["previous_mistakes"] == ["The user asked for the count in the first message."]
    mistakes = "<previous_mistakes>\n1. The user asked for the count in the first message.\n</previous_mistakes>"
    verified = [body["messages"][-1]["content"] for body in policy.bodies["verifier"]]
    assert [mistakes in request for request in verified] == [False, False, True, True]  # 2 turns per run
    assert all(mistakes not in json.dumps(body) for body in policy.bodies["user"] + policy.bodies["agent"])


def test_a_conversation_the_validator_always_rejects_is_rerun_then_invalid(server, database, tmp_path):
    policy = ChatPolicy([user_error("first"), user_error("second"), user_error("third"), user_error("fourth")])
    server.respond(policy)
    agent = chatqa_agent(server, user_reruns=1)

    answer = agent.run(chatqa_task(database).view)

    assert answer.user_error
    assert policy.roles.count("validator") == 2  # 1 + user_reruns attempts, each validated once
    assert policy.roles.count("agent") == 4  # each attempt ran the whole conversation again
    attempts = answer.transcript[-1]["user_attempts"]
    assert [(a["valid"], a["validator"]) for a in attempts] == [(False, "first"), (False, "second")]

    policy.roles.clear()
    row = run_trial(agent, chatqa_task(database), 0, "b1", tmp_path)
    assert policy.roles.count("validator") == 2
    assert row["status"] == "invalid" and "simulated user" in row["error"]
    assert row.get("reward") is None and row.get("correct") is None  # not scored
    assert row["tool_calls"] == 1  # the last attempt's answer is still described


def test_by_default_a_conversation_runs_at_most_ten_times(server, database):
    # EHR-ChatQA's run.py: --max_retry 10 runs of a conversation before it gives up
    policy = ChatPolicy([user_error(f"mistake {n}") for n in range(12)])
    server.respond(policy)
    answer = chatqa_agent(server).run(chatqa_task(database).view)
    assert answer.user_error and policy.roles.count("validator") == 10
    assert answer.transcript[-1]["user_attempts"][-1]["previous_mistakes"] == [f"mistake {n}" for n in range(9)]


def test_an_agent_out_of_actions_is_no_user_error_and_the_validator_is_not_asked(server, database):
    policy = ChatPolicy([user_error("never asked")], endless=True)
    server.respond(policy)
    answer = chatqa_agent(server, max_actions=2).run(chatqa_task(database).view)
    assert answer.stop_reason == "max_actions" and not answer.user_error
    assert "validator" not in policy.roles
    assert answer.transcript[-1]["user_attempts"][0]["validator"].startswith("The DB agent spent its whole action")


# --- web search ------------------------------------------------------------------------------------------------------

class SearchServer:
    """A local HTTP search endpoint that answers each POST with the next scripted (status, body) and records the
    JSON bodies it was sent."""

    def __init__(self, *replies: tuple[int, str, float]):
        self.replies, self.requests = list(replies), []
        search = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                search.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                status, body, delay = search.replies.pop(0) if search.replies else (500, "{}", 0.0)
                time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body.encode())))
                    self.end_headers()
                    self.wfile.write(body.encode())
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_port}/search"

    def __enter__(self):
        threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._http.shutdown()
        self._http.server_close()


TAVILY_LIKE = json.dumps({"results": [{"title": "Metoprolol", "url": "http://x.org/m",
                                       "content": "Metoprolol is a β1-selective blocker."},
                                      {"title": "Beta blockers", "url": "http://x.org/b",
                                       "content": "Beta blockers slow the heart."}]})


def test_the_agent_searches_the_web_through_an_http_provider(server, database):
    with SearchServer((200, TAVILY_LIKE, 0.0)) as search:
        server.tool_call("web_search", {"query": "metoprolol mechanism"})
        server.tool_call("submit_answer", {"sql": "select count(*) from patients"})

        answer = make_agent(server, web_search=search.url).run(ehrsql_view(database))

    first, second = server.bodies()
    assert tool_names(first) == [*DATABASE_TOOLS, "web_search", "submit_answer", "abstain"]
    assert search.requests == [{"query": "metoprolol mechanism", "max_results": 10}]
    assert tool_results(second) == [json.dumps(["Metoprolol is a β1-selective blocker.",
                                                "Beta blockers slow the heart."], ensure_ascii=False, indent=2)]
    assert (answer.web_search, answer.answer_rows) == (f"http:{search.url}", [[3]])


@pytest.mark.parametrize("reply, error", [
    ((503, "{}", 0.0), "the search endpoint answered HTTP 503"),
    ((200, "<html>", 0.0), "the search endpoint's answer is not JSON"),
    ((200, '{"hits": []}', 0.0), "the search endpoint's answer holds no list of results"),
    ((200, "{}", 3.0), "the search endpoint did not answer within 1 s"),
])
def test_a_failing_search_endpoint_is_an_error_for_the_agent(reply, error):
    with SearchServer(reply) as search, pytest.raises(WebSearchError, match=error):
        HttpSearchProvider(search.url, timeout_s=1).search("x")


def test_a_bare_list_of_strings_or_objects_is_read_too():
    body = json.dumps(["plain text", {"content": "an object", "url": "http://x"}, {"no": "content"}, 3])
    with SearchServer((200, body, 0.0)) as search:
        results = HttpSearchProvider(search.url).search("x")
    assert [(r.content, r.url) for r in results] == [("plain text", None), ("an object", "http://x")]


# --- fhir ------------------------------------------------------------------------------------------------------------

LAB = "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-d-labitems"


def _observation(id_: str, value: float, when: str) -> dict:
    return {"resourceType": "Observation", "id": id_, "status": "final", "subject": {"reference": "Patient/pat-a"},
            "code": {"coding": [{"system": LAB, "code": "50971", "display": "Potassium"}]},
            "effectiveDateTime": when, "valueQuantity": {"value": value, "unit": "mEq/L"}}


RESOURCES = [{"resourceType": "Patient", "id": "pat-a", "gender": "female"},
             _observation("obs-1", 4.1, "2180-07-21T08:00:00-04:00"),
             _observation("obs-2", 5.6, "2180-07-23T08:00:00-04:00")]


@pytest.fixture(scope="module")
def resources_db(tmp_path_factory) -> Path:
    return write_resources_db(tmp_path_factory.mktemp("fhir") / "resources.duckdb", RESOURCES)


def fhir_task(resources_db: Path) -> EvalTask:
    view = TaskView("fhir", "f1", "mimic_iv", "What was the patient's last potassium value?",
                    context="Assume the current time is 2180-08-01 00:00:00.", fhir_resources=resources_db,
                    patient_fhir_id="pat-a")
    return EvalTask(view, Gold(True, "[['5.6']]", fhir_ids=("obs-2", "obs-9")))


@pytest.mark.parametrize("answer_text, correct", [("The last potassium was 5.6 mEq/L.", True), ("4.1", False)])
def test_fhir_free_text_answer_and_its_retrieval_are_scored(server, resources_db, tmp_path, answer_text, correct):
    server.tool_call("get_resource", {"resource_type": "Observation", "id": "obs-2"})
    server.tool_call("get_resource", {"resource_type": "Observation", "id": "Observation/obs-1"})
    server.tool_call("get_resource", {"resource_type": "Observation", "id": "obs-2"})  # again: counted once
    server.tool_call("submit_answer", {"answer": answer_text})
    task = fhir_task(resources_db)

    row = run_trial(make_agent(server, fhir_variant="retriever"), task, 0, "b1", tmp_path)

    assert row["status"] == "completed" and row["answer"] == answer_text
    assert (row["correct"], row["reward"], row["answer_judge"]) == (correct, float(correct), "match")
    # retrieved obs-2, obs-1; gold obs-2, obs-9: precision 1/2, recall 1/2
    assert (row["retrieval_precision"], row["retrieval_recall"]) == (0.5, 0.5)
    assert (row["tool_calls"], row["stop_reason"]) == (4, "finished")
    first = server.bodies()[0]
    assert "The patient's FHIR Patient id is pat-a." in first["messages"][0]["content"]
    assert "Assume the current time is 2180-08-01 00:00:00." in first["messages"][0]["content"]
    assert json.loads(tool_results(server.bodies()[1])[0])["valueQuantity"]["value"] == 5.6


def test_fhir_answer_fields(server, resources_db):
    server.tool_call("get_resources_by_patient", {"resource_type": "Observation", "patient_id": "pat-a"})
    server.tool_call("submit_answer", {"answer": "5.6"})
    answer = make_agent(server, fhir_variant="retriever").run(fhir_task(resources_db).view)
    assert (answer.answer_text, answer.free_text, answer.fhir_ids) == ("5.6", True, ("obs-1", "obs-2"))
    assert answer.answer_rows is None and not answer.abstained


@pytest.mark.parametrize("variant, tools", [
    ("retriever", ["get_resources_by_patient", "get_resource"]),
    ("search", ["fhir_search", "get_resource"]),
    ("code", ["get_resources_by_patient", "get_resource", "fhir_search", "execute_python"]),
])
def test_fhir_variants_offer_their_tools_and_abstain(server, resources_db, variant, tools):
    server.tool_call("abstain", {"reason": "no such lab"})
    answer = make_agent(server, fhir_variant=variant).run(fhir_task(resources_db).view)
    assert tool_names(server.bodies()[0]) == [*tools, "submit_answer", "abstain"]
    assert answer.abstained and answer.answer_text is None and not answer.free_text and answer.fhir_ids == ()


# --- dq --------------------------------------------------------------------------------------------------------------

@pytest.fixture
def dq_task(tmp_path) -> EvalTask:
    """One table of four rows; r3 and r4 hold injected errors (two clusters)."""
    folder = tmp_path / "dq" / "audit"
    (folder / "data").mkdir(parents=True)
    (folder / "gold").mkdir()
    (folder / "instruction.md").write_text("Find implausible lab values.\n")
    with gzip.open(folder / "data" / "labs.csv.gz", "wt", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerows([["_row_id", "value"], ["r1", "4.1"], ["r2", "5.6"], ["r3", "999"], ["r4", "-5"]])
    labels = [dict(table="labs", row_id=row_id, cluster_id=cluster, family="range", subtype="s", role="corrupted",
                   field="value", original_value="4", corrupted_value=value)
              for row_id, cluster, value in [("r3", "c1", "999"), ("r4", "c2", "-5")]]
    pq.write_table(pa.Table.from_pylist(labels, schema=LABEL_SCHEMA), folder / "gold" / "labels.parquet")
    view = TaskView("dq", "audit", None, (folder / "instruction.md").read_text(), data_dir=folder / "data")
    return EvalTask(view, Gold(dq_task_dir=folder))


def test_load_audit_tables_reads_every_csv_as_text(dq_task, tmp_path):
    database = load_audit_tables(dq_task.view.data_dir, tmp_path / "audit.duckdb")
    with duckdb.connect(str(database), read_only=True) as con:
        assert con.execute("select table_name from information_schema.tables").fetchall() == [("labs",)]
        assert con.execute("select * from labs order by _row_id").fetchall() == [
            ("r1", "4.1"), ("r2", "5.6"), ("r3", "999"), ("r4", "-5")]
        assert {t for (t,) in con.execute("select data_type from information_schema.columns").fetchall()} == {
            "VARCHAR"}


def test_an_audit_flags_the_rows_its_queries_return(server, dq_task, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "scratch"))
    (tmp_path / "scratch").mkdir()
    server.tool_call("flag_rows", {"table": "labs", "query": "select _row_id from labs where value::double > 100"})
    server.tool_call("flag_rows", {"table": "labs", "query": "select 'zz' as _row_id"})  # not a row: ignored
    server.tool_call("flag_rows", {"table": "drugs", "query": "select _row_id from labs"})
    server.tool_call("flag_rows", {"table": "labs", "query": "select _row_id from labs where valu < 0"})
    server.tool_call("flag_rows", {"table": "labs", "query": "select _row_id from labs where value::double < 0;"})
    server.tool_call("submit_audit")

    row = run_trial(make_agent(server), dq_task, 0, "b1", tmp_path / "artifacts")

    results = [m["content"] for m in json.loads(row["transcript"]) if m["role"] == "tool"]
    assert results[:3] == ["Flagged.", "Flagged.", "Error: no table 'drugs'; the tables are labs"]
    assert results[3].startswith("Error: the query failed: ") and "returning the _row_id column of labs" in results[3]
    assert results[4:] == ["Flagged.", "Recorded."]
    assert (row["status"], row["tool_calls"], row["tool_errors"], row["stop_reason"]) == ("completed", 6, 0,
                                                                                         "finished")
    # both clusters caught, every flagged row labelled
    assert (row["dq_recall"], row["dq_precision"], row["reward"], row["correct"]) == (1.0, 1.0, 1.0, True)
    assert Path(row["flagged_rows_path"]).read_text() == "table,_row_id\nlabs,r3\nlabs,r4\n"
    port = server.base_url.split(":")[2].split("/")[0]  # the agent name as one portable folder name
    assert Path(row["flagged_rows_path"]) == tmp_path / "artifacts" / f"llm_scripted_http_127.0.0.1_{port}_v1" / \
        "dq" / "audit-0.csv"
    assert list((tmp_path / "scratch").iterdir()) == []  # the scratch database is removed

    first = server.bodies()[0]
    assert tool_names(first) == ["table_search", "column_search", "sql_execute", "flag_rows", "submit_audit"]
    assert "Find implausible lab values." in first["messages"][0]["content"]


def test_a_partial_audit_scores_its_recall_and_precision(server, dq_task, tmp_path):
    server.tool_call("flag_rows", {"table": "labs", "query": "select _row_id from labs where _row_id in ('r1', 'r3')"})
    server.tool_call("submit_audit")
    agent = make_agent(server)

    row = run_trial(agent, dq_task, 0, "b1", tmp_path)

    # 1 of 2 clusters caught (r3); 1 of 2 flagged rows labelled (r1 is clean): not passed
    assert (row["dq_recall"], row["dq_precision"], row["reward"], row["correct"]) == (0.5, 0.5, 0.0, False)
    assert Path(row["flagged_rows_path"]).read_text() == "table,_row_id\nlabs,r1\nlabs,r3\n"


# --- endpoint failures -----------------------------------------------------------------------------------------------

def ehrsql_task(database: Path) -> EvalTask:
    return EvalTask(ehrsql_view(database), Gold(True, "[['3']]"))


def test_a_server_error_is_transient_and_re_raised_for_a_later_retry(server, database, tmp_path):
    server.error(500, "the GPU caught fire")
    with pytest.raises(TransientTrialError, match="500.*the GPU caught fire") as raised:
        run_trial(make_agent(server), ehrsql_task(database), 0, "b1", tmp_path, raise_transient=True)
    assert isinstance(raised.value.__cause__, ChatError)
    assert len(server.requests) == 1  # max_retries 0: no retry by the SDK

    server.error(500, "the GPU caught fire")
    row = run_trial(make_agent(server), ehrsql_task(database), 0, "b1", tmp_path)
    assert (row["status"], row["reward"], row["correct"]) == ("error", 0.0, False)
    assert row["error"].startswith(f"ChatError: openai:scripted@{server.base_url}: ") and "GPU caught fire" in \
        row["error"]


def test_a_refused_request_is_an_error_even_when_transients_are_raised(server, database, tmp_path):
    server.error(401, "invalid api key")
    row = run_trial(make_agent(server), ehrsql_task(database), 0, "b1", tmp_path, raise_transient=True)
    assert row["status"] == "error" and row["error"].startswith("ChatError: ") and "invalid api key" in row["error"]


@pytest.mark.parametrize("status, transient", [(429, True), (500, True), (503, True), (400, False), (401, False)])
def test_which_chat_errors_are_transient(server, status, transient):
    server.error(status, "scripted")
    model = tool_chat_model(f"openai:scripted@{server.base_url}", timeout_s=5, max_retries=0)
    with pytest.raises(ChatError) as raised:
        model.chat([{"role": "user", "content": "hi"}], [])
    assert raised.value.transient is transient
    assert len(server.requests) == 1


def test_an_agent_needs_an_llm_config_and_never_shows_its_key():
    with pytest.raises(ValueError, match="agent 'oracle' is not an llm agent"):
        LlmAgent(parse_agent("oracle"))
    agent = LlmAgent(parse_agent("llm:openai:gpt-4o"), api_key="sk-secret-123")
    assert "sk-secret" not in repr(agent) and repr(agent) == "LlmAgent('llm:openai:gpt-4o', model='openai:gpt-4o')"
