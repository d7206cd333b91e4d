"""LLM-written note questions (ehrbench.noteqa.llm_generation): what the model is asked, and each filter rejecting its
own fault — unreadable replies, evidence not in the notes, repeated options, questions a model answers without the
notes, near-duplicate questions — while a sound reply becomes a record that passes the suite's checks."""

from __future__ import annotations

import hashlib
import json

from ehrbench.noteqa.llm_generation import SYSTEM_PROMPT, TOPICS, llm_questions
from ehrbench.noteqa.records import DischargeNote
from ehrbench.noteqa.suite import checked

NOTES = {
    patient: [DischargeNote(f"{patient}-DS-1", patient, patient * 10, 1, "2150-01-03 00:00:00",
                            f"Chief Complaint:\nfever\n\nBrief Hospital Course:\nTreated  with\n cefepime for "
                            f"pneumonia of patient {patient}.")]
    for patient in range(1, 8)
}


def reply(patient: int, **changes) -> str:
    item = {"question": f"Which antibiotic treated the pneumonia of patient {patient} in this admission?",
            "choices": {"A": "Vancomycin", "B": "Cefepime", "C": "Azithromycin", "D": "Doxycycline",
                        "E": "Ceftriaxone"},
            "answer": "B", "evidence": "treated with cefepime for pneumonia", "open_answer": "Cefepime."}
    return "Here it is:\n" + json.dumps(item | changes)


class Scripted:
    """A ChatModel that answers by patient (read from the notes' header) and records each request."""

    provider, model = "openai", "scripted"

    def __init__(self, by_patient: dict[int, str], blind: str = "I cannot tell without the notes."):
        self.by_patient, self.blind, self.requests = by_patient, blind, []

    def complete(self, messages, *, temperature, n=1):
        self.requests.append((messages, temperature))
        if messages[0]["role"] == "system":
            patient = int(messages[1]["content"].split("Patient ID : ", 1)[1].split("\n", 1)[0])
            return [self.by_patient[patient]]
        return [self.blind]


def test_a_sound_reply_becomes_a_question_that_passes_the_suites_checks():
    model = Scripted({1: reply(1)})
    questions, report = llm_questions({1: NOTES[1]}, model, seed=0)
    assert report.to_dict() == {"asked": 1, "kept": 1, "rejected": {}}
    [question] = questions
    assert question["answer"] == "B" and question["reference_answer"] == "Cefepime"
    assert question["model_answer"] == "Cefepime." and question["generator"] == "llm:openai:scripted"
    # the quote is found across the cleaned notes' own spacing and case, and kept as the notes write it
    assert question["span"] == "Treated with\ncefepime for pneumonia"
    assert question["template"] in TOPICS and question["category"] == "Level1" and question["note_ids"] == ["1-DS-1"]
    record = {"question_id": "1", **question}
    [row] = checked([record], {1: NOTES[1]})
    assert all(row[name] for name in ("notes_found", "span_in_notes", "options_distinct", "answer_is_reference"))
    [(messages, temperature)] = model.requests
    assert messages[0]["content"] == SYSTEM_PROMPT and temperature == 0.7
    assert messages[1]["content"].startswith(f"Topic of the question: {question['template']}.\n\n[note 1 start]\n"
                                             "Patient ID : 1\n")


def test_each_filter_rejects_its_own_fault():
    replies = {
        1: reply(1),
        2: "I would rather not.",
        3: reply(3, answer="F"),
        4: reply(4, evidence="treated with meropenem"),
        5: reply(5, choices={"A": "Cefepime", "B": " cefepime", "C": "x", "D": "y", "E": "z"}),
        6: reply(1),  # patient 1's question and answer again (the notes differ, the item does not)
        7: reply(7, choices={"A": "Vancomycin", "B": "Cefepime", "C": "Azithromycin", "D": "Doxycycline"}),
    }
    questions, report = llm_questions(NOTES, Scripted(replies), seed=0)
    assert [q["patient_id"] for q in questions] == [1]
    assert report.to_dict() == {"asked": 7, "kept": 1, "rejected": {
        "duplicate": 1, "evidence_not_in_notes": 1, "options_not_distinct": 1, "unreadable": 3}}


def test_the_same_wording_with_another_answer_is_another_item():
    other = {"A": "Vancomycin", "B": "Meropenem", "C": "Azithromycin", "D": "Doxycycline", "E": "Cefepime"}
    replies = {1: reply(1), 2: reply(1, choices=other, answer="E"), 3: reply(1, choices=other, answer="B",
                                                                           evidence="patient 3")}
    notes = {1: NOTES[1], 2: NOTES[2], 3: [DischargeNote("3-DS-1", 3, 30, 1, "2150-01-03 00:00:00",
                                                         "Meropenem given to patient 3")]}
    questions, report = llm_questions(notes, Scripted(replies), seed=0)
    # patient 2: the same question and the same answer (Cefepime, at E) is a duplicate; patient 3: another answer
    assert [q["patient_id"] for q in questions] == [1, 3] and report.rejected == {"duplicate": 1}


def test_a_question_the_model_answers_without_the_notes_is_rejected():
    for blind, kept in (("B. Cefepime", 0), ("A", 1), ("The notes are needed.", 1)):
        model = Scripted({1: reply(1)}, blind=blind)
        questions, report = llm_questions({1: NOTES[1]}, model, seed=0, blind=model)
        assert report.kept == len(questions) == kept, blind
        blind_request = model.requests[-1][0]
        assert blind_request == [{"role": "user", "content": (
            "Question : Which antibiotic treated the pneumonia of patient 1 in this admission?\nChoices :\n"
            "A. Vancomycin\nB. Cefepime\nC. Azithromycin\nD. Doxycycline\nE. Ceftriaxone\n\nAnswer :")}]
        assert "fever" not in blind_request[0]["content"]  # no notes


def test_the_seed_draws_each_patients_topic():
    def topics(seed: int) -> list[str]:  # distinct questions (hex digests), so that none is a near-duplicate
        replies = {p: reply(p, question=hashlib.sha256(str(p).encode()).hexdigest()) for p in NOTES}
        questions, report = llm_questions(NOTES, Scripted(replies), seed=seed)
        assert report.kept == len(NOTES)
        return [q["template"] for q in questions]

    assert topics(0) == topics(0)
    assert len({tuple(topics(seed)) for seed in range(3)}) > 1
