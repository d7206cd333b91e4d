"""Template note questions (docs/benchmarks.md#synthetic-discharge-summaries): the offline, deterministic counterpart
of LLM-written EHRNoteQA questions, asked over a patient's synthetic discharge summaries about the facts they were
written from (`int_notes__mimic_iv__admission_facts`).

One question per patient, in EHRNoteQA's record layout (`ehrbench.noteqa.records.NoteQuestion`: `patient_id`,
`category`, `num_notes`, `question`, `choice_A`..`choice_E`, `answer`) plus what ehrbench keeps as hidden gold:
`template`, `hadm_id`, `note_ids`, `span` (the text in the notes that supports the answer), `reference_answer` (the
open-ended gold: the correct option's text, as in EHRNoteQA) and `seed`. Every choice (the admission asked about, the
template, the distractors, the options' order) draws from `keyed_rng(seed, "noteqa", <patient>)`, so one patient's
question never shifts another's.

The checks a generated question must pass (else the next template is tried; a patient with none gets no question):
its span is in the notes it is asked over, its five options are distinct, and no distractor appears in those notes
in the same role (another diagnosis of the patient is not offered as a wrong principal diagnosis).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from ehrbench.llm.token_count import count_text
from ehrbench.noteqa.published import LETTERS, MAX_NOTES, notes_block
from ehrbench.seeding import keyed_rng

LEVEL_1_MAX_TOKENS = 3500  # EHRNoteQA's Level 1 fits a 4k context; longer note sets are Level 2


def level(notes: str) -> str:
    """EHRNoteQA's level of a notes block: Level1 when it fits a 4k context (LEVEL_1_MAX_TOKENS), else Level2."""
    return "Level1" if count_text(notes) <= LEVEL_1_MAX_TOKENS else "Level2"


@dataclass(frozen=True)
class AdmissionFacts:
    """One row of int_notes__mimic_iv__admission_facts (the columns the templates ask about)."""

    subject_id: int
    hadm_id: int
    note_seq: int
    dischtime: datetime
    length_of_stay_days: int
    principal_diagnosis: str | None
    first_abnormal_lab: str | None
    discharge_location: str | None


@dataclass(frozen=True)
class Template:
    name: str
    question: str  # with {date}: the discharge date of the admission asked about
    value: Callable[[AdmissionFacts], str | None]  # the correct answer, None when the admission lacks it
    span: Callable[[str], str]  # the text of the notes that states the value


def _number_of_days(facts: AdmissionFacts) -> str:
    return str(facts.length_of_stay_days)


TEMPLATES: tuple[Template, ...] = (
    Template("principal_diagnosis", "What was the principal diagnosis of the admission that ended on {date}?",
             lambda f: f.principal_diagnosis, lambda v: f"Chief Complaint:\n{v}"),
    Template("length_of_stay", "For how many days was the patient hospitalized in the admission that ended on {date}?",
             _number_of_days, lambda v: f"Hospitalized for {v} days."),
    Template("first_abnormal_lab",
             "Which laboratory test gave the first abnormal result of the admission that ended on {date}?",
             lambda f: f.first_abnormal_lab, lambda v: f" {v} "),
    Template("discharge_location", "Where was the patient discharged to after the admission that ended on {date}?",
             lambda f: f.discharge_location, lambda v: f"Discharge Disposition:\n{v}"),
)


def generate_questions(facts: Sequence[AdmissionFacts], notes: Mapping[int, Sequence[tuple[str, str]]], *,
                       seed: int) -> list[dict]:
    """One question per patient that has notes. `notes`: per subject_id, its (note_id, note text) in charttime order,
    of which the first three are asked over; `facts`: every admission (the distractor pools), matched to its note by
    the synthetic note id `<subject_id>-DS-<note_seq>`."""
    by_patient: dict[int, list[AdmissionFacts]] = {}
    for row in sorted(facts, key=lambda f: (f.subject_id, f.note_seq)):
        by_patient.setdefault(row.subject_id, []).append(row)
    pools = {template.name: sorted({v for row in facts if (v := template.value(row)) is not None})
             for template in TEMPLATES}
    questions = []
    for subject_id in sorted(notes):
        rng = keyed_rng(seed, "noteqa", str(subject_id))
        question = _patient_question(subject_id, by_patient.get(subject_id, []), list(notes[subject_id])[:MAX_NOTES],
                                     pools, rng)
        if question is not None:
            questions.append(question | {"seed": seed})
    return questions


def _patient_question(subject_id: int, admissions: list[AdmissionFacts], notes: list[tuple[str, str]],
                      pools: dict[str, list[str]], rng: np.random.Generator) -> dict | None:
    by_note_id = {f"{row.subject_id}-DS-{row.note_seq}": row for row in admissions}
    asked = [by_note_id[note_id] for note_id, _ in notes if note_id in by_note_id]
    if not asked:
        return None
    text = notes_block([note for _, note in notes])
    target = asked[int(rng.integers(len(asked)))]
    for index in rng.permutation(len(TEMPLATES)):
        template = TEMPLATES[int(index)]
        value = template.value(target)
        if value is None or template.span(value) not in text:
            continue
        same_role = {v for row in asked if (v := template.value(row)) is not None}
        distractors = _distractors(template, value, same_role, pools[template.name], rng)
        if distractors is None:
            continue
        options = [value, *distractors]
        order = rng.permutation(len(options))
        choices = [options[int(i)] for i in order]
        return {
            "patient_id": subject_id,
            "category": level(text),
            "num_notes": len(notes),
            "clinician": None,
            "question": template.question.format(date=target.dischtime.strftime("%Y-%m-%d")),
            **{f"choice_{letter}": choice for letter, choice in zip(LETTERS, choices, strict=True)},
            "answer": LETTERS[choices.index(value)],
            "template": template.name,
            "hadm_id": target.hadm_id,
            "note_ids": [note_id for note_id, _ in notes],
            "span": template.span(value),
            "reference_answer": value,
        }
    return None


def _distractors(template: Template, value: str, same_role: set[str], pool: list[str],
                 rng: np.random.Generator) -> list[str] | None:
    """Four wrong options: other admissions' values (never one of this patient's in the same role); for a number of
    days, numbers near it."""
    if template.name == "length_of_stay":
        days = int(value)
        nearby = [str(d) for d in range(max(days - 3, 0), days + 6) if str(d) not in same_role]
        candidates = nearby
    else:
        candidates = [v for v in pool if v not in same_role]
    if len(candidates) < len(LETTERS) - 1:
        return None
    picked = rng.choice(len(candidates), size=len(LETTERS) - 1, replace=False)
    return [candidates[int(i)] for i in sorted(picked)]
