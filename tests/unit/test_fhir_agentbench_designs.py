"""FHIR-AgentBench's five agent designs (glee4810/FHIR-AgentBench agent/*.py) against a scripted model over a tiny
FHIR view: which tools each call offers, what the model is shown, when the trial ends, what retrieval is scored;
and its scoring beside ours (published judge steps, retrieval over the gold's types)."""

from __future__ import annotations

import json

import pytest

from ehrbench.agents.config import parse_agent
from ehrbench.agents.llm_agent import LlmAgent
from ehrbench.agents.llm_agent.fhir_agentbench import question_input
from ehrbench.llm.token_count import count_messages, count_text
from ehrbench.llm.tool_chat import ChatTurn, ToolCall, Usage
from ehrbench.scoring import score_trial
from ehrbench.scoring.fhir_agentbench_judge import published_correct
from ehrbench.tasks import AgentAnswer, EvalTask, Gold, TaskView
from tests.fhir_fakes import write_resources_db

PATIENT = "pat-1"
SANDBOX = "unsafe: unit test of the agent designs"


class Script:
    """Replies from `steps` in order (a str: text; a list of (tool, arguments): tool calls); records each request's
    messages and offered tool names."""

    provider, model = "openai", "scripted"

    def __init__(self, steps):
        self.steps = list(steps)
        self.requests: list[tuple[list[dict], list[str]]] = []

    def chat(self, messages, tools, *, temperature=0.0, max_tokens=None) -> ChatTurn:
        self.requests.append((json.loads(json.dumps(messages)), [t.name for t in tools]))
        step = self.steps.pop(0)
        if isinstance(step, str):
            return ChatTurn(step, [], Usage(100, 10), "stop", 0.0)
        calls = [ToolCall(f"c{len(self.requests)}_{i}", name, args, json.dumps(args)) for i, (name, args) in
                 enumerate(step)]
        return ChatTurn(None, calls, Usage(100, 10), "tool_calls", 0.0)


@pytest.fixture
def view(tmp_path) -> TaskView:
    resources = [{"resourceType": "Patient", "id": PATIENT, "meta": {"profile": ["p"]}},
                 {"resourceType": "Encounter", "id": "enc-1", "subject": {"reference": f"Patient/{PATIENT}"},
                  "meta": {"profile": ["e"]}, "period": {"start": "2150-01-01T10:00:00-05:00"}},
                 {"resourceType": "Encounter", "id": "enc-2", "subject": {"reference": f"Patient/{PATIENT}"},
                  "period": {"start": "2151-01-01T10:00:00-05:00"}},
                 {"resourceType": "Medication", "id": "med-1", "code": {"text": "aspirin"}}]
    database = write_resources_db(tmp_path / "resources.duckdb", resources)
    return TaskView("fhir", "fab/q1", "mimic_iv", "How many hospital visits?",
                    "Assume the current time is 2151-12-31 23:59:00.", fhir_resources=database,
                    patient_fhir_id=PATIENT, protocol="fhir_agentbench")


def run(variant: str, steps, view: TaskView, monkeypatch) -> tuple[AgentAnswer, Script]:
    script = Script(steps)
    monkeypatch.setattr(LlmAgent, "chat_model", lambda self, spec=None: script)
    agent = LlmAgent(parse_agent("llm:scripted@http://127.0.0.1:9/v1", {"fhir_variant": variant}), sandbox=SANDBOX)
    return agent.run(view), script


ENCOUNTERS = ("get_resources_by_patient_fhir_id", {"resource_type": "Encounter", "patient_fhir_id": PATIENT})


def test_the_input_is_the_question_the_patient_and_the_assumption(view):
    assert question_input(view) == ("Question: How many hospital visits?\nContext:\nPatient FHIR ID is pat-1.\n"
                                    "Assume the current time is 2151-12-31 23:59:00.")


def test_single_turn_retriever_fetches_then_answers_without_tools(view, monkeypatch):
    answer, script = run("single_turn_retriever", [[ENCOUNTERS], "There were 2 visits."], view, monkeypatch)
    (first, offered_first), (second, offered_second) = script.requests
    assert offered_first == ["get_resources_by_patient_fhir_id"] and offered_second == []
    assert "get_resources_by_patient_fhir_id" in first[0]["content"] and "Do not plan ahead" in first[0]["content"]
    shown = second[-1]["content"]  # the whole output, str() of the dict, text and meta removed
    assert shown.startswith("{'Encounter': [{'resourceType': 'Encounter', 'id': 'enc-1'") and "meta" not in shown
    assert answer.answer_text == "There were 2 visits." and answer.free_text
    assert answer.fhir_ids_by_type == {"Encounter": ["enc-1", "enc-2"]}
    assert answer.stop_reason == "finished" and answer.tool_calls == 1


def test_single_turn_query_generator_sends_one_get_and_keeps_meta(view, monkeypatch):
    request = ("fhir_request_get", {"query_string": f"Encounter?patient={PATIENT}&_count=1"})
    answer, script = run("single_turn_query_generator", [[request], "One page: enc-1."], view, monkeypatch)
    assert script.requests[0][1] == ["fhir_request_get"]
    shown = script.requests[1][0][-1]["content"]
    assert "'meta': {'profile': ['e']}" in shown and "enc-2" not in shown  # the first page only
    assert answer.fhir_ids_by_type == {"Encounter": ["enc-1"]}


def test_single_turn_code_sees_a_summary_and_runs_only_the_first_code_call(view, monkeypatch):
    code = ("execute_python_code", {"code": "answer = len(retrieved_resources['Encounter'])\nprint('ignored')"})
    other = ("execute_python_code", {"code": "answer = 99"})
    answer, script = run("single_turn_retriever_code", [[ENCOUNTERS], [code, other], "2 visits."], view,
                         monkeypatch)
    offered = [tools for _, tools in script.requests]
    assert offered == [["get_resources_by_patient_fhir_id"], ["execute_python_code"], []]
    messages = script.requests[2][0]
    tool_messages = [m["content"] for m in messages if m["role"] == "tool"]
    assert tool_messages == ["retrieved_fhir_resources['Encounter'] (2 items)", "{'answer': 2}"]
    assert answer.answer_text == "2 visits."


def test_multi_turn_ends_on_the_final_answer_phrase_and_scores_the_last_fetch_of_a_type(view, monkeypatch):
    by_id = ("get_resources_by_resource_id", {"resource_type": "Encounter", "resource_id": "enc-2"})
    steps = [[ENCOUNTERS], [by_id], "Thinking it over.", "The final answer is: 2"]
    answer, script = run("multi_turn_retriever", steps, view, monkeypatch)
    assert all(tools == ["get_resources_by_patient_fhir_id", "get_resources_by_resource_id"]
               for _, tools in script.requests)
    assert len(script.requests) == 4  # a text reply without the phrase just continues
    assert answer.answer_text == "The final answer is: 2"
    assert answer.fhir_ids_by_type == {"Encounter": ["enc-2"]}  # dict.update: the later Encounter list replaced it


def test_multi_turn_stops_after_30_calls(view, monkeypatch):
    answer, script = run("multi_turn_retriever", ["Still looking."] * 30, view, monkeypatch)
    assert len(script.requests) == 30
    assert answer.answer_text == "No final answer reached within iteration limit."


def test_multi_turn_code_reads_medications_of_no_patient_and_an_unexpected_tool_ends_it(view, monkeypatch):
    medications = ("get_resources_by_patient_fhir_id", {"resource_type": "Medication", "patient_fhir_id": PATIENT})
    answer, script = run("multi_turn_retriever_code", [[medications], [("fhir_request_get", {"query_string": "x"})]],
                         view, monkeypatch)
    assert script.requests[1][0][-1]["content"] == "retrieved_fhir_resources['Medication'] (1 items)"
    assert answer.answer_text == ("Expected 'execute_python_code' or 'get_resources_by_patient_fhir_id' or "
                                  "'get_resources_by_resource_id' tool call, but got 'fhir_request_get'")


def test_an_input_over_32000_tokens_ends_the_trial_with_the_published_error(view, monkeypatch):
    view = TaskView(**{**view.__dict__, "context": "word " * 33_000})
    answer, script = run("single_turn_retriever", [], view, monkeypatch)
    assert script.requests == []
    assert answer.answer_text.startswith("Error: Input tokens exceeded: ") and answer.answer_text.endswith("> 32000")
    assert answer.stop_reason == "input_tokens_exceeded"


def test_tokens_are_cl100k_with_four_per_message_and_two_for_the_reply():
    assert count_text("Hello world") == 2  # cl100k_base: [9906, 1917]
    assert count_messages([{"role": "user", "content": "Hello world"}, {"role": "assistant", "content": None}]) == \
        2 + 4 + 4 + 2
    long = "alpha beta\n" * 20_000  # counted in pieces, the same as whole
    assert count_text(long) == 20_000 * count_text("alpha beta\n")


# --- scoring: FHIR-AgentBench's columns beside ours ---

def task(fhir_ids=("o1", "o2"), fhir_types=("Observation", "Observation"), answer="[[2]]") -> EvalTask:
    view = TaskView("fhir", "fab/q1", "mimic_iv", "How many?", protocol="fhir_agentbench")
    return EvalTask(view, Gold(True, answer, fhir_ids=fhir_ids, fhir_types=fhir_types, protocol="fhir_agentbench",
                               published_answer=answer))


def test_published_retrieval_ignores_other_types_and_needs_every_gold_id():
    answer = AgentAnswer(answer_text="2", free_text=True, fhir_ids=("o1", "e1"),
                         fhir_ids_by_type={"Observation": ["o1"], "Encounter": ["e1"]})
    scored = score_trial(task(), answer)
    assert scored["published_retrieval_precision"] == 1.0 and scored["published_retrieval_recall"] == 0.0
    assert scored["retrieval_precision"] == 0.5 and scored["retrieval_recall"] == 0.5  # ours, beside it


def test_an_empty_gold_scores_precision_0_recall_1_and_no_answer_is_right():
    answer = AgentAnswer(answer_text="I cannot find any such record.", free_text=True)
    scored = score_trial(task(fhir_ids=(), fhir_types=(), answer="[[0]]"), answer)
    assert (scored["published_retrieval_precision"], scored["published_retrieval_recall"]) == (0.0, 1.0)
    assert scored["published_correct"] is True and scored["published_judge"] == "no_answer"


class JudgeModel:
    def __init__(self, replies):
        self.replies, self.prompts = list(replies), []

    def chat(self, messages, tools, *, temperature=0.0, max_tokens=None):
        self.prompts.append(messages[0]["content"])
        return ChatTurn(self.replies.pop(0), [], Usage(5, 1), "stop", 0.0)


def test_the_published_judge_steps():
    assert not published_correct("q", "[[1]]", False, "Error: Input tokens exceeded: 40000 > 32000").correct
    assert not published_correct("q", "[[1]]", False, "yes", error="boom").correct
    model = JudgeModel(["question answered", "'1'"])  # normalised, then judged; quotes stripped
    verdict = published_correct("Did it happen?", "no answer", True, "0 times", model)
    assert verdict.correct and verdict.method == "llm"
    assert "- True answer: no answer" in model.prompts[1] and "- Model answer: 0 times" in model.prompts[1]
    model = JudgeModel(["maybe", "x", "y"])
    assert not published_correct("q", "[[1]]", False, "yes", model).correct  # never 0 or 1: wrong
    # the gold ids decide "no answer", not the rows: a pruned question's real answer is judged against "no answer"
    model = JudgeModel(["No answer."])
    assert published_correct("q", "[[5]]", True, "Nothing found.", model).correct


@pytest.mark.parametrize(("answer", "correct"), [
    ("[[0]]", True), ("The final answer is: 0", True), ("No", True), ("[[None]]", True),
    ("I could not find any record.", True), ("[[3]]", False), ("Yes", False)])
def test_without_a_judge_model_an_empty_gold_accepts_only_answers_of_nothing(answer, correct):
    assert published_correct("q", "[[0]]", True, answer).correct is correct
