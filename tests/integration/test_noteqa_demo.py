"""The noteqa suite of the demo build, end to end: the build's synthetic notes and validated questions with hidden
gold; its EHRNoteQA export imported back through `--format ehrnoteqa` as the same tasks; an LLM agent answering both
formats through the real openai SDK against a scripted OpenAI-compatible server, with EHRNoteQA's judge (three votes)
on the same server, under a real Prefect server; and a prompt beyond the model's context reported, not sent."""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from ehrbench.agents.config import parse_agents
from ehrbench.evaluation.tasks import load_tasks, taskset_tasks
from ehrbench.evaluation.trial import run_trial
from ehrbench.layout import BuildLayout, DataLayout
from ehrbench.noteqa.published import LETTERS, answer_prompt
from ehrbench.tasksets.formats import BuildInfo
from ehrbench.tasksets.importer import plan_import, run_import
from tests.gold_policy import GoldPolicy
from tests.llm_servers import OpenAIServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def demo(request) -> Path:
    if os.environ.get("EHRBENCH_DEMO_BUILD"):
        return Path(os.environ["EHRBENCH_DEMO_BUILD"]).resolve()
    return request.getfixturevalue("demo_build")["folder"]


@pytest.fixture(scope="module")
def data(tmp_path_factory, demo) -> DataLayout:
    root = tmp_path_factory.mktemp("noteqa-data")
    build = BuildInfo.load(demo)
    (root / "benchmarks").mkdir()
    (root / "benchmarks" / build.build_id).symlink_to(build.folder)
    (root / "benchmarks" / "latest").symlink_to(build.build_id)
    return DataLayout(root=root)


def test_the_build_has_validated_note_questions_over_labelled_synthetic_notes(demo):
    build = BuildLayout(demo)
    manifest = json.loads(build.manifest.read_text())["noteqa"]
    assert manifest["notes_source"] == "synthetic" and manifest["quarantined"] == 0
    assert manifest["kept"] == manifest["patients_with_notes"] >= 90
    assert manifest["validation"]["questions"] == manifest["generated"]
    questions = pq.read_table(build.noteqa_questions).to_pylist()
    notes = {row["note_id"]: row for row in pq.read_table(build.noteqa_notes(synthetic=True)).to_pylist()}
    assert not build.noteqa_notes(synthetic=False).exists()
    assert len(questions) == manifest["kept"] and {q["category"] for q in questions} == {"Level1", "Level2"}
    for q in questions:
        assert all(q[name] for name in ("notes_found", "span_in_notes", "options_distinct", "answer_is_reference"))
        asked = [notes[i] for i in q["note_ids"]]
        assert [n["subject_id"] for n in asked] == [q["patient_id"]] * q["num_notes"]
        assert all(n["text"].startswith("SYNTHETIC NOTE") for n in asked)
        assert q[f"choice_{q['answer']}"] == q["reference_answer"]
    # the agent-facing notes file holds notes only: no question, option or answer
    assert set(pq.read_schema(build.noteqa_notes(synthetic=True)).names) == {
        "note_id", "subject_id", "hadm_id", "note_type", "note_seq", "charttime", "storetime", "text"}
    assert pq.read_table(build.noteqa_quarantine).num_rows == 0


def test_the_ehrnoteqa_export_imports_back_as_the_same_tasks(data, demo):
    export = BuildLayout(demo).ehrnoteqa_export
    manifest = run_import(plan_import(data, "ehrnoteqa", [export / "EHRNoteQA.jsonl"],
                                      notes=export / "synthetic_note"))
    imported = taskset_tasks(data.taskset(manifest.name), demo)
    built = load_tasks(demo, ("noteqa",))
    assert len(imported) == len(built) == 2 * manifest.tasks
    for mine, theirs in zip(built, imported, strict=True):
        assert theirs.view.task_id == f"ehrnoteqa/{mine.view.task_id}"
        assert (theirs.view.notes, theirs.view.choices, theirs.view.instruction, theirs.view.qa_format) == (
            mine.view.notes, mine.view.choices, mine.view.instruction, mine.view.qa_format)
        assert (theirs.gold.published_answer, theirs.gold.answer_text) == (mine.gold.published_answer,
                                                                           mine.gold.answer_text)


def test_an_llm_agent_answers_both_formats_and_the_judge_votes(data, demo, prefect_api_url):
    from flows.evaluate import evaluate_agents

    with OpenAIServer() as server:
        server.respond(GoldPolicy(demo))
        folder = evaluate_agents(agents=[f"llm:scripted@{server.base_url}"], agent_options={"max_retries": 0},
                                 suites=["noteqa"], judge_model=f"openai:scripted@{server.base_url}",
                                 judge_votes=3, limit=6, trials=2, run_id="noteqa-llm", data_dir=str(data.root),
                                 report=False)
        bodies = server.bodies()
    trials = duckdb.sql(f"select * from read_parquet('{folder}/*.parquet')").df()
    assert len(trials) == 12 and (trials["status"] == "completed").all(), trials[["task_id", "error"]]
    assert (trials["reward"] == 1.0).all() and (trials["answer_judge"] == "llm").all()
    assert set(trials["protocol"]) == {"ehrnoteqa"}
    multichoice = trials[trials["task_id"].str.endswith("-multichoice")]
    assert multichoice["option_order"].isna().tolist() == (multichoice["trial"] == 0).tolist()  # trial 1 shuffles

    readers = [b for b in bodies if b["messages"][0]["content"].startswith("Discharge Summary :")]
    judges = [b for b in bodies if b["messages"][0]["content"].startswith("Your task is to evaluate")]
    assert len(readers) == 12 and len(judges) == 3 * 12  # one answer per trial, three judge votes per answer
    assert all(len(b["messages"]) == 1 and b["messages"][0]["role"] == "user" and b["temperature"] == 0.0
               and b["max_tokens"] == 600 and "tools" not in b for b in readers + judges)
    # the agent's prompt is EHRNoteQA's, over the task's notes, with the options as trial 1 shows them
    tasks = {task.view.task_id: task for task in load_tasks(demo, ("noteqa",))}
    shown = multichoice[multichoice["trial"] == 1].iloc[0]
    task = tasks[shown["task_id"]]
    choices = tuple(task.view.choices[LETTERS.index(letter)] for letter in shown["option_order"])
    assert answer_prompt("multichoice", task.view.notes, task.view.instruction, choices) in [
        b["messages"][0]["content"] for b in readers]


def test_a_prompt_beyond_the_models_context_is_reported_and_not_sent(demo, tmp_path):
    from ehrbench.agents.llm_agent import LlmAgent

    task = max(load_tasks(demo, ("noteqa",)), key=lambda t: len(t.view.notes or ""))
    with OpenAIServer() as server:
        [config] = parse_agents([f"llm:scripted@{server.base_url}"], {"context_tokens": 2000, "max_retries": 0})
        row = run_trial(LlmAgent(config, sandbox="unsafe: no SQL runs"), task, 0, "b", tmp_path)
        assert server.requests == []
    assert (row["status"], row["stop_reason"], row["correct"], row["answer_judge"]) == (
        "completed", "context_exceeded", False, "no_answer")
    assert "not sent" in json.loads(row["transcript"])[-1]["content"]
