"""EHRNoteQA's question file and the MIMIC-IV-Note discharge summaries it is asked over
(docs/benchmarks.md#ehrnoteqa-accuracy).

`EHRNoteQA.jsonl` (PhysioNet `ehr-notes-qa-llms` 1.0.1) holds one question per patient: `patient_id` (MIMIC-IV
`subject_id`, the only link to the notes), `category` (the level), `num_notes` (1-3), `clinician`, `question`,
`choice_A`..`choice_E` and `answer` (a letter). A question is asked over the first `num_notes` of its patient's
discharge summaries (MIMIC-IV-Note 2.2 `note/discharge.csv.gz`) in charttime order. Published preprocessing sorts by
charttime alone (pandas' unstable default sort); ties are broken here by note_seq, then note_id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ehrbench.errors import ConfigError
from ehrbench.noteqa.published import LETTERS, MAX_NOTES, note_with_header
from ehrbench.warehouse import open_duckdb


class NoteQuestion(BaseModel):
    """One line of EHRNoteQA.jsonl."""

    model_config = ConfigDict(extra="allow", frozen=True)

    patient_id: int
    category: str
    num_notes: int = Field(ge=1, le=MAX_NOTES)
    clinician: str | None = None
    question: str = Field(min_length=1)
    choice_A: str
    choice_B: str
    choice_C: str
    choice_D: str
    choice_E: str
    answer: str = Field(pattern="^[A-E]$")

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(getattr(self, f"choice_{letter}") for letter in LETTERS)


@dataclass(frozen=True)
class DischargeNote:
    note_id: str
    subject_id: int
    hadm_id: int
    note_seq: int
    charttime: str  # 'YYYY-MM-DD HH:MM:SS', as the CSV writes it
    text: str

    def with_header(self) -> str:
        return note_with_header(self.subject_id, self.hadm_id, self.charttime, self.text)


def read_questions(path: Path) -> list[NoteQuestion]:
    """EHRNoteQA.jsonl's questions in file order. A line that is not JSON or lacks a field, or a patient asked twice:
    a ConfigError naming the file, the line and the field."""
    if not path.is_file():
        raise ConfigError(f"{path}: {'not a file' if path.exists() else 'not found'}; expected EHRNoteQA.jsonl "
                          f"(PhysioNet ehr-notes-qa-llms)")
    questions: list[NoteQuestion] = []
    seen: dict[int, int] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: line {number}: not valid JSON ({exc.msg}); expected one EHRNoteQA "
                              f"question per line") from None
        if not isinstance(item, dict):
            raise ConfigError(f"{path}: line {number}: a JSON {type(item).__name__}; expected a question object")
        try:
            question = NoteQuestion.model_validate(item)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"]) or "line"
            raise ConfigError(f"{path}: line {number} (patient {item.get('patient_id', '?')}): field {where}: "
                              f"{error['msg']}") from None
        if question.patient_id in seen:
            raise ConfigError(f"{path}: line {number}: patient {question.patient_id} is asked again (first on line "
                              f"{seen[question.patient_id]}); EHRNoteQA has one question per patient")
        seen[question.patient_id] = number
        questions.append(question)
    if not questions:
        raise ConfigError(f"{path}: no questions; expected EHRNoteQA.jsonl")
    return questions


def read_discharge_notes(path: Path, subject_ids: set[int]) -> dict[int, list[DischargeNote]]:
    """The discharge summaries of `subject_ids` from MIMIC-IV-Note's discharge.csv.gz, per patient in charttime
    order (ties: note_seq, then note_id)."""
    if not path.is_file():
        raise ConfigError(f"{path}: not found; expected MIMIC-IV-Note's note/discharge.csv.gz")
    columns = ("note_id", "subject_id", "hadm_id", "note_seq", "charttime", "text")
    con = open_duckdb()
    try:
        header = [name for (name, *_) in con.execute(
            "describe select * from read_csv(?, header = true, all_varchar = true)", [str(path)]).fetchall()]
        missing = [name for name in columns if name not in header]
        if missing:
            raise ConfigError(f"{path}: no column(s) {', '.join(missing)}; expected MIMIC-IV-Note's discharge table "
                              f"({', '.join(columns)}, …)")
        con.execute("create temp table wanted (subject_id bigint)")
        con.executemany("insert into wanted values (?)", [(s,) for s in sorted(subject_ids)])
        rows = con.execute("""
            select note_id, cast(subject_id as bigint), cast(hadm_id as bigint), cast(note_seq as integer),
                   charttime, text
            from read_csv(?, header = true, all_varchar = true)
            where cast(subject_id as bigint) in (select subject_id from wanted)
            order by cast(subject_id as bigint), charttime, cast(note_seq as integer), note_id
            """, [str(path)]).fetchall()
    except duckdb.Error as exc:
        raise ConfigError(f"{path}: cannot read it as MIMIC-IV-Note's discharge.csv.gz ({exc})") from None
    finally:
        con.close()
    return by_patient(rows)


def by_patient(rows: Iterable[Sequence]) -> dict[int, list[DischargeNote]]:
    """Rows of (note_id, subject_id, hadm_id, note_seq, charttime, text), already in order, as notes per patient."""
    notes: dict[int, list[DischargeNote]] = {}
    for row in rows:
        notes.setdefault(row[1], []).append(DischargeNote(*row))
    return notes


def question_notes(question: NoteQuestion, notes: dict[int, list[DischargeNote]], *, source: Path) -> list[str]:
    """The headed notes a question is asked over: its patient's first `num_notes` discharge summaries. Fewer than
    that: a ConfigError naming the patient and the notes found."""
    found = notes.get(question.patient_id, [])
    if len(found) < question.num_notes:
        have = ", ".join(note.note_id for note in found) or "none"
        raise ConfigError(f"{source}: patient {question.patient_id} has {len(found)} discharge summar"
                          f"{'y' if len(found) == 1 else 'ies'} ({have}); the EHRNoteQA question asks over "
                          f"{question.num_notes}")
    return [note.with_header() for note in found[:question.num_notes]]
