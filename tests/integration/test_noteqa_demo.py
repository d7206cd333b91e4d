"""The noteqa suite of the demo build, end to end: the build's synthetic notes and validated questions with hidden
gold; its EHRNoteQA export imported back through `--format ehrnoteqa` as the same tasks; an LLM agent answering both
formats through the real openai SDK against a scripted OpenAI-compatible server, with EHRNoteQA's judge (three votes)
on the same server, under a real Prefect server; and a prompt beyond the model's context reported, not sent."""

from __future__ import annotations

import json
from hashlib import sha256
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from ehrbench.agents.config import parse_agents
from ehrbench.evaluation.tasks import load_tasks, taskset_tasks
from ehrbench.evaluation.trial import run_trial
from ehrbench.layout import BuildLayout
from ehrbench.noteqa.published import LETTERS, answer_prompt
from ehrbench.tasksets.importer import plan_import, run_import
from tests.gold_policy import GoldPolicy
from tests.llm_servers import OpenAIServer

pytestmark = pytest.mark.integration


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


def test_the_ehrnoteqa_export_imports_back_as_the_same_tasks(demo_data, demo):
    export = BuildLayout(demo).ehrnoteqa_export
    manifest = run_import(plan_import(demo_data, "ehrnoteqa", [export / "EHRNoteQA.jsonl"],
                                      notes=export / "synthetic_note"))
    imported = taskset_tasks(demo_data.taskset(manifest.name), demo)
    built = load_tasks(demo, ("noteqa",))
    assert len(imported) == len(built) == 2 * manifest.tasks
    for mine, theirs in zip(built, imported, strict=True):
        assert theirs.view.task_id == f"ehrnoteqa/{mine.view.task_id}"
        assert (theirs.view.notes, theirs.view.choices, theirs.view.instruction, theirs.view.qa_format) == (
            mine.view.notes, mine.view.choices, mine.view.instruction, mine.view.qa_format)
        assert (theirs.gold.published_answer, theirs.gold.answer_text) == (mine.gold.published_answer,
                                                                           mine.gold.answer_text)


def test_an_llm_agent_answers_both_formats_and_the_judge_votes(demo_data, demo, prefect_api_url):
    from flows.evaluate import evaluate_agents

    with OpenAIServer() as server:
        server.respond(GoldPolicy(demo))
        folder = evaluate_agents(agents=[f"llm:scripted@{server.base_url}"], agent_options={"max_retries": 0},
                                 suites=["noteqa"], judge_model=f"openai:scripted@{server.base_url}",
                                 judge_votes=3, limit=6, trials=2, run_id="noteqa-llm", data_dir=str(demo_data.root),
                                 report=False)
        bodies = server.bodies()
    trials = duckdb.sql(f"select * from read_parquet('{folder}/*.parquet')").df()
    assert len(trials) == 12 and (trials["status"] == "completed").all(), trials[["task_id", "error"]]
    assert (trials["reward"] == 1.0).all() and (trials["answer_judge"] == "llm").all()
    assert set(trials["protocol"]) == {"ehrnoteqa"}
    # the judge's three votes a trial, at the scripted server's 10 + 5 tokens a reply: the evaluation's cost, apart from
    # the agent's (one reply a trial); an unpriced model has no cost
    assert (trials["judge_input_tokens"] == 30).all() and (trials["judge_output_tokens"] == 15).all()
    assert (trials["input_tokens"] == 10).all() and trials["judge_cost_usd"].isna().all()
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
    # the letter the correct option was shown at, for the report's position bias: the file's letter moved with it
    file_letter = task.gold.published_answer
    assert shown["correct_option"] == LETTERS[shown["option_order"].index(file_letter)]
    assert (multichoice[multichoice["trial"] == 0]["correct_option"].tolist()
            == [tasks[t].gold.published_answer for t in multichoice[multichoice["trial"] == 0]["task_id"]])
    assert trials[trials["task_id"].str.endswith("-openended")]["correct_option"].isna().all()


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


def test_llm_written_questions_over_the_demo_notes_are_filtered_cached_and_pass_the_checks(demo, tmp_path):
    """Through the real openai SDK: a scripted model quotes each note's discharge disposition, answering with the
    correct option at A for even patients (which the blind model, always "A", then guesses: rejected) and at C for
    odd ones; a second run is answered from the cache without a request."""
    from ehrbench.llm.cache import CachedChat, ResponseCache
    from ehrbench.llm.chat import OpenAIChat
    from ehrbench.noteqa.llm_generation import llm_questions
    from ehrbench.noteqa.suite import checked
    from tests.llm_servers import Reply

    notes = _demo_notes(demo)
    notes = {subject: notes[subject] for subject in sorted(notes)[:12]}
    places = ["HOME", "HOSPICE", "REHAB", "SKILLED NURSING FACILITY", "DIED", "AGAINST ADVICE", "HOME HEALTH CARE"]

    def policy(request):
        content = request.body["messages"][-1]["content"]
        if request.body["messages"][0]["role"] != "system":
            return Reply(text="A")  # the blind model
        patient = int(content.split("Patient ID : ", 1)[1].split("\n", 1)[0])
        place = content.split("Discharge Disposition:\n", 1)[1].split("\n", 1)[0]
        others = [p for p in places if p != place][:4]
        options = [place, *others] if patient % 2 == 0 else [others[0], others[1], place, others[2], others[3]]
        return Reply(text=json.dumps({
            # questions differ (a digest of the patient): same-worded ones with one answer would be duplicates
            "question": f"Where did the patient go after admission {sha256(str(patient).encode()).hexdigest()}?",
            "choices": dict(zip("ABCDE", options, strict=True)), "answer": "A" if patient % 2 == 0 else "C",
            "evidence": f"Discharge Disposition:\n{place}", "open_answer": place.title()}))

    with OpenAIServer() as server:
        server.respond(policy)
        model = CachedChat(OpenAIChat("scripted", base_url=server.base_url, timeout_s=5, max_retries=0),
                           ResponseCache(tmp_path / "llm.sqlite"))
        questions, report = llm_questions(notes, model, seed=0, blind=model)
        asked = len(server.requests)
        again, _ = llm_questions(notes, model, seed=0, blind=model)
        assert len(server.requests) == asked  # every reply came from the cache
    odd = [subject for subject in notes if subject % 2]
    assert [q["patient_id"] for q in questions] == odd and again == questions
    assert report.to_dict()["rejected"] == {"guessable": len(notes) - len(odd)}
    records = checked([{"question_id": str(q["patient_id"]), **q} for q in questions], notes)
    assert all(r["span_in_notes"] and r["options_distinct"] and r["answer_is_reference"] and r["notes_found"]
               for r in records)


def _demo_notes(demo: Path) -> dict:
    """The demo build's synthetic notes per patient, from its notes file (the questions' patients)."""
    from ehrbench.noteqa.suite import read_notes_file

    notes: dict[int, list] = {}
    for note in sorted(read_notes_file(BuildLayout(demo).noteqa_notes(synthetic=True)).values(),
                       key=lambda n: (n.subject_id, n.charttime, n.note_seq)):
        notes.setdefault(note.subject_id, []).append(note)
    return notes
