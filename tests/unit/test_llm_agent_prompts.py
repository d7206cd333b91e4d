"""The LLM agent's prompts, rendered for fixed tasks of every suite, are byte-identical to the texts the agent sent
before its prompts moved out of Python into template files (ehrbench/agents/llm_agent/prompts/). The expected texts
in llm_agent_prompts.json were captured by running the agent as it was (one module, prompts as string constants), so
an edited template — a re-wrapped line, a trailing space, a lost newline — fails here. The chatqa prompts were
replaced on purpose by EHR-ChatQA's published agent instruction and rules (ehrbench.agents.llm_agent.chatqa) and
captured anew: by task type (incre, adapt, not given), engine, database, and with web_search offered.

Each suite runs for real (its tools over a tiny database, the simulated user in chatqa) against an in-process
scripted model that records every request; the system and user messages the agent model received are compared."""

from __future__ import annotations

import copy
import csv
import gzip
import json
import sqlite3
from pathlib import Path

import duckdb
import pytest

from ehrbench.agents.config import parse_agent
from ehrbench.agents.llm_agent import LlmAgent
from ehrbench.agents.simulated_user import STOP_TOKEN, USER_SYSTEM_PROMPT, VALIDATOR_PROMPT, VERIFIER_PROMPT
from ehrbench.llm.tool_chat import ChatTurn, ToolCall, Usage
from ehrbench.tasks import TaskView
from tests.fhir_fakes import write_resources_db

EXPECTED = Path(__file__).with_name("llm_agent_prompts.json")
SANDBOX = "unsafe: prompt rendering only"  # the SQL runs in-process: what is tested is the text, not isolation
CONTEXT = "Assume the current time is 2100-12-31 23:59:00."
# EHR-ChatQA's task type of each chatqa scenario, as the harness hands it to the agent (none: not given)
TASK_TYPES = {"chatqa": "incre", "chatqa_adapt_eicu_sqlite_web": "adapt"}


class ScriptedModel:
    """Replies to the agent from `script`, in order, and records the messages of each of its requests; plays the
    simulated user, its verifier and the validator of chatqa (told apart by their system prompts)."""

    provider, model = "openai", "scripted"

    def __init__(self, script: list[tuple[str, dict] | str]):
        self.script = list(script)
        self.agent_requests: list[list[dict]] = []

    def chat(self, messages, tools, *, temperature=0.0, max_tokens=None) -> ChatTurn:
        if not tools and messages[0]["content"] == VERIFIER_PROMPT:
            return self._text('{"ok": true, "feedback": ""}')
        if not tools and messages[0]["content"] == VALIDATOR_PROMPT:
            return self._text('{"explanation": "scripted", "broken_rule": "", "evidence": "", "result": "no_error"}')
        if messages[0]["content"].startswith(USER_SYSTEM_PROMPT.split("{", 1)[0]):  # the simulated user
            opening = len(messages) <= 2  # its system prompt and the opening cue
            return self._text("Hi, I need a patient count." if opening else f"Thanks, that is all. {STOP_TOKEN}")
        self.agent_requests.append(copy.deepcopy(messages))
        step = self.script.pop(0)
        if isinstance(step, str):
            return self._text(step)
        name, arguments = step
        call = ToolCall(f"call_{len(self.agent_requests)}", name, arguments, json.dumps(arguments))
        return ChatTurn(None, [call], Usage(10, 5), "tool_calls", 0.0)

    @staticmethod
    def _text(text: str) -> ChatTurn:
        return ChatTurn(text, [], Usage(10, 5), "stop", 0.0)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    """The same two tables in DuckDB and in SQLite, a FHIR resources database and a dq task's CSV folder."""
    folder = tmp_path_factory.mktemp("prompts")
    statements = ["create table patients (subject_id integer, gender varchar, alive boolean)",
                  "insert into patients values (1, 'f', true), (2, 'm', false)",
                  "create table labs (subject_id integer, label varchar, value double)",
                  "insert into labs values (1, 'potassium', 4.1)"]
    with duckdb.connect(str(folder / "ehr.duckdb")) as con:
        for statement in statements:
            con.execute(statement)
    with sqlite3.connect(folder / "ehr.sqlite") as con:
        for statement in statements:
            con.execute(statement)
    con.close()
    write_resources_db(folder / "resources.duckdb", [{"resourceType": "Patient", "id": "pat-a", "gender": "female"}])
    (folder / "dq").mkdir()
    with gzip.open(folder / "dq" / "labs.csv.gz", "wt", newline="") as handle:
        csv.writer(handle).writerows([["_row_id", "value"], ["r1", "4.1"], ["r2", "999"]])
    return {"duckdb": folder / "ehr.duckdb", "sqlite": folder / "ehr.sqlite",
            "fhir": folder / "resources.duckdb", "dq": folder / "dq"}


def scenarios(data: dict[str, Path]) -> dict[str, tuple[dict, TaskView, list]]:
    """name -> (agent options, task, the agent model's script). A text reply first draws the one nudge
    (in chatqa it goes to the simulated user)."""
    submit_sql = ("submit_answer", {"sql": "select count(*) from patients"})
    count_sql = ("sql_execute", {"query": "select count(*) from patients"})
    return {
        "ehrsql_tools_duckdb": ({}, TaskView("ehrsql", "q1", "mimic_iv", "Which patients are alive?",
                                             context=CONTEXT, database=data["duckdb"]), ["Two.", submit_sql]),
        "ehrsql_tools_sqlite": ({}, TaskView("ehrsql", "q2", "mimic_iv", "How many labs?",
                                             database=data["sqlite"]), [submit_sql]),
        "ehrsql_single_turn_duckdb": ({"ehrsql_mode": "single_turn"},
                                      TaskView("ehrsql", "q3", "mimic_iv", "How many patients {are} there?",
                                               context=CONTEXT, database=data["duckdb"]), ["null"]),
        "chatqa": ({}, TaskView("chatqa", "c1", "mimic_iv", "You want the number of patients.", context=CONTEXT,
                                database=data["duckdb"]), [count_sql, "There are 2 patients."]),
        "chatqa_adapt_eicu_sqlite_web": ({"web_search": "http://127.0.0.1:9/search"},
                                         TaskView("chatqa", "c2", "eicu", "You want the number of patients.",
                                                  context="Assume the current time is 2105-06-30 08:00:00.",
                                                  database=data["sqlite"]),
                                         [count_sql, "There are two patients: <answer>2</answer>."]),
        "chatqa_no_task_type": ({}, TaskView("chatqa", "c3", None, "You want the number of patients.",
                                             database=data["duckdb"]), [count_sql, "There are 2 patients."]),
        "fhir": ({"fhir_variant": "retriever"},
                 TaskView("fhir", "f1", "mimic_iv", "What is the patient's gender?", context=CONTEXT,
                          fhir_resources=data["fhir"], patient_fhir_id="pat-a"),
                 ["Female.", ("submit_answer", {"answer": "female"})]),
        "fhir_no_patient": ({"fhir_variant": "search"},
                            TaskView("fhir", "f2", "mimic_iv", "Any allergies?", fhir_resources=data["fhir"]),
                            [("abstain", {"reason": "none"})]),
        "dq": ({}, TaskView("dq", "audit", None, "Find implausible lab values.\n{row} braces stay as written.\n",
                            data_dir=data["dq"]), ["I see one.", ("submit_audit", {})]),
        "dq_terminal": ({"dq_interface": "terminal"},
                        TaskView("dq", "audit", None, "Find implausible lab values.\n{row} braces stay as written.\n",
                                 data_dir=data["dq"]), ["I see one.", ("submit_audit", {})]),
    }


def rendered_prompts(data: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> dict[str, list[dict]]:
    """Per scenario: the system and user messages of the agent model's last request (the nudge included)."""
    prompts = {}
    for name, (options, view, script) in scenarios(data).items():
        model = ScriptedModel(script)
        monkeypatch.setattr(LlmAgent, "chat_model", lambda self, spec=None, model=model: model)
        agent = LlmAgent(parse_agent("llm:openai:scripted", {"max_retries": 0, **options}), sandbox=SANDBOX,
                         task_types={(view.suite, view.task_id): TASK_TYPES.get(name)})
        agent.run(view)
        prompts[name] = [message for message in model.agent_requests[-1] if message["role"] in ("system", "user")]
    return prompts


def test_every_suites_prompts_render_as_before(data, monkeypatch):
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    rendered = rendered_prompts(data, monkeypatch)
    assert rendered.keys() == expected.keys()
    for name, messages in expected.items():
        assert rendered[name] == messages, name
