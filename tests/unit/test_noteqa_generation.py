"""Template note questions (ehrbench.noteqa.generation): EHRNoteQA's record layout, the correct option is the fact
the notes state, distractors never come from the patient's own facts in the same role, and the seed decides all."""

from __future__ import annotations

from datetime import datetime

from ehrbench.noteqa.generation import AdmissionFacts, generate_questions
from ehrbench.noteqa.published import LETTERS
from ehrbench.noteqa.records import NoteQuestion

DIAGNOSES = ["Sepsis", "Pneumonia", "Asthma", "Gout", "Anemia", "Cellulitis", "Syncope"]
LABS = ["Glucose", "Sodium", "Potassium", "Creatinine", "Hemoglobin", "Lactate"]
PLACES = ["HOME", "HOSPICE", "SKILLED NURSING FACILITY", "REHAB", "HOME HEALTH CARE", "AGAINST ADVICE"]


def admission(subject: int, seq: int) -> AdmissionFacts:
    i = subject * 3 + seq
    return AdmissionFacts(subject, subject * 100 + seq, seq, datetime(2150 + seq, 1 + i % 12, 1 + i % 28, 14, 0),
                          i % 9, DIAGNOSES[i % len(DIAGNOSES)], LABS[i % len(LABS)], PLACES[i % len(PLACES)])


def note(facts: AdmissionFacts) -> str:
    return (f"Patient ID : {facts.subject_id}\nAdmission ID : {facts.hadm_id}\nChartdate : "
            f"{facts.dischtime:%Y-%m-%d}\nChief Complaint:\n{facts.principal_diagnosis}\nPertinent Results:\n"
            f"2150-01-01 10:00 {facts.first_abnormal_lab} 9 mg/dL (abnormal)\nBrief Hospital Course:\n"
            f"Hospitalized for {facts.length_of_stay_days} days. No ICU stay.\nDischarge Disposition:\n"
            f"{facts.discharge_location}")


FACTS = [admission(subject, seq) for subject in range(1, 13) for seq in (1, 2)]
NOTES = {s: [(f"{s}-DS-{f.note_seq}", note(f)) for f in FACTS if f.subject_id == s] for s in range(1, 13)}


def test_one_question_per_patient_in_ehrnoteqa_layout_with_the_fact_as_the_answer():
    questions = generate_questions(FACTS, NOTES, seed=0)
    assert [q["patient_id"] for q in questions] == list(range(1, 13))
    by_hadm = {f.hadm_id: f for f in FACTS}
    for item in questions:
        record = NoteQuestion.model_validate(item)  # the published file's schema
        target = by_hadm[item["hadm_id"]]
        assert item["hadm_id"] in {f.hadm_id for f in FACTS if f.subject_id == record.patient_id}
        correct = record.choices[LETTERS.index(record.answer)]
        expected = {"principal_diagnosis": target.principal_diagnosis, "first_abnormal_lab": target.first_abnormal_lab,
                    "discharge_location": target.discharge_location,
                    "length_of_stay": str(target.length_of_stay_days)}[item["template"]]
        assert correct == expected == item["reference_answer"]
        assert f"{target.dischtime:%Y-%m-%d}" in record.question
        assert len(set(record.choices)) == 5
        assert record.num_notes == 2 and item["note_ids"] == [f"{record.patient_id}-DS-1", f"{record.patient_id}-DS-2"]
        assert all(item["span"] in n for _, n in NOTES[record.patient_id] if f"Admission ID : {target.hadm_id}\n" in n)
        assert record.category == "Level1"


def test_distractors_are_never_the_patients_own_facts_in_the_same_role():
    for seed in range(5):
        for item in generate_questions(FACTS, NOTES, seed=seed):
            own = [f for f in FACTS if f.subject_id == item["patient_id"]]
            role = {"principal_diagnosis": [f.principal_diagnosis for f in own],
                    "first_abnormal_lab": [f.first_abnormal_lab for f in own],
                    "discharge_location": [f.discharge_location for f in own],
                    "length_of_stay": [str(f.length_of_stay_days) for f in own]}[item["template"]]
            wrong = [item[f"choice_{letter}"] for letter in LETTERS if letter != item["answer"]]
            assert not set(wrong) & set(role)


def test_the_seed_decides_every_choice():
    assert generate_questions(FACTS, NOTES, seed=3) == generate_questions(FACTS, NOTES, seed=3)
    first, other = generate_questions(FACTS, NOTES, seed=3), generate_questions(FACTS, NOTES, seed=4)
    assert first != other
    answers = {q["answer"] for seed in range(6) for q in generate_questions(FACTS, NOTES, seed=seed)}
    assert answers == set(LETTERS)  # the correct option lands in every position
    # one patient's question does not depend on the others being asked
    alone = generate_questions(FACTS, {5: NOTES[5]}, seed=3)
    assert alone == [q for q in first if q["patient_id"] == 5]


def test_a_fact_the_notes_do_not_state_is_not_asked_about():
    facts = [admission(1, 1)]
    stated = {1: [("1-DS-1", "Patient ID : 1\nChief Complaint:\nSomething else")]}
    pool = FACTS  # distractor pools from every admission
    assert generate_questions(facts + pool[2:], stated, seed=0) == []
