"""A build's `noteqa` suite (docs/benchmarks.md#ehrnoteqa-accuracy): questions over a patient's discharge summaries in
EHRNoteQA's record layout, the checks Great Expectations reads, and the files they are published in.

    noteqa/questions.parquet             hidden: one row per question (NOTE_QUESTION_SCHEMA), gold and provenance
    noteqa/synthetic_notes.parquet       agent-facing: the notes the questions ask over (NOTE_SCHEMA); `notes.parquet`
                                         when they are MIMIC-IV-Note's
    exports/ehrnoteqa/EHRNoteQA.jsonl    hidden: the questions as EHRNoteQA's file writes them
    exports/ehrnoteqa/synthetic_note/discharge.csv.gz   the notes as MIMIC-IV-Note's file (`note/` for real notes),
                                         so EHRNoteQA's own preprocessing runs on a build unchanged

The checks (`checked`) are columns the validation suite (`expectations/noteqa.json`) expects to be true: every note a
question names is among the notes, its supporting span is in them, its five options are distinct and its answer
letter points at its reference answer.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ehrbench.layout import BuildLayout, write_once
from ehrbench.llm.token_count import count_text
from ehrbench.noteqa.generation import AdmissionFacts, generate_questions
from ehrbench.noteqa.published import LETTERS, MAX_NOTES, notes_block
from ehrbench.noteqa.records import DischargeNote, by_patient
from ehrbench.noteqa.text import options_distinct
from ehrbench.seeding import keyed_rng
from ehrbench.settings import NotesSource
from ehrbench.warehouse import open_duckdb

NOTES_DATABASE = "mimic_iv"  # the notes are MIMIC-IV's (the suite's `db`)
# where each source's notes are built (dbt models/notes/<folder>/, built by the noteqa stage): schema and selector
NOTES_SCHEMAS: dict[str, str] = {"synthetic": "notes__mimic_iv", "mimic_iv_note": "notes__mimic_iv_note"}
NOTES_MODELS: dict[str, str] = {"synthetic": "notes.mimic_iv", "mimic_iv_note": "notes.mimic_iv_note"}
FACTS_SCHEMA = "int_notes__mimic_iv"  # the admissions' facts the synthetic notes are written from
NOTE_COLUMNS = ("note_id", "subject_id", "hadm_id", "note_type", "note_seq", "charttime", "storetime", "text")
NOTE_SCHEMA = pa.schema([
    ("note_id", pa.string()), ("subject_id", pa.int64()), ("hadm_id", pa.int64()), ("note_type", pa.string()),
    ("note_seq", pa.int32()), ("charttime", pa.string()), ("storetime", pa.string()), ("text", pa.string()),
])
CHECK_COLUMNS = ("notes_found", "span_in_notes", "options_distinct", "answer_is_reference")
NOTE_QUESTION_SCHEMA = pa.schema([
    ("question_id", pa.string()), ("db", pa.string()),
    # EHRNoteQA's record
    ("patient_id", pa.int64()), ("category", pa.string()), ("num_notes", pa.int32()), ("clinician", pa.string()),
    ("question", pa.string()), *((f"choice_{letter}", pa.string()) for letter in LETTERS), ("answer", pa.string()),
    # ehrbench's hidden gold and provenance
    ("template", pa.string()), ("hadm_id", pa.int64()), ("note_ids", pa.list_(pa.string())), ("span", pa.string()),
    ("reference_answer", pa.string()), ("seed", pa.int64()),
    ("model_answer", pa.string()),  # an LLM-written question's own open-ended answer (the gold is reference_answer)
    ("generator", pa.string()),  # template | llm:<model> | imported
    ("notes_source", pa.string()),  # synthetic | mimic_iv_note
    ("notes_tokens", pa.int64()),  # cl100k tokens of the notes block (the level's measure)
    *((name, pa.bool_()) for name in CHECK_COLUMNS),
])


def read_notes(warehouse: Path, source: NotesSource) -> dict[int, list[DischargeNote]]:
    """The discharge summaries the suite can ask over, per patient in charttime order (ties: note_seq, note_id): the
    synthetic ones (dbt model notes__mimic_iv__discharge) or MIMIC-IV-Note's of the build's patients, in the shifted
    databases' times (notes__mimic_iv_note__discharge)."""
    con = open_duckdb(str(warehouse), read_only=True)
    try:
        rows = con.execute(f"""
            select note_id, subject_id, hadm_id, note_seq, strftime(charttime, '%Y-%m-%d %H:%M:%S'), text
            from {NOTES_SCHEMAS[source]}.discharge order by subject_id, charttime, note_seq, note_id""").fetchall()
    finally:
        con.close()
    return by_patient(rows)


def read_synthetic_notes(warehouse: Path) -> tuple[list[AdmissionFacts], dict[int, list[DischargeNote]]]:
    """The admissions' facts (int_notes__mimic_iv__admission_facts) and the synthetic discharge summaries."""
    con = open_duckdb(str(warehouse), read_only=True)
    try:
        facts = [AdmissionFacts(*row) for row in con.execute(f"""
            select subject_id, hadm_id, note_seq, dischtime, length_of_stay_days, principal_diagnosis,
                   first_abnormal_lab, discharge_location
            from {FACTS_SCHEMA}.int_notes__mimic_iv__admission_facts order by subject_id, note_seq""").fetchall()]
    finally:
        con.close()
    return facts, read_notes(warehouse, "synthetic")


def patients_asked(notes: Mapping[int, Sequence[DischargeNote]], limit: int,
                   seed: int) -> dict[int, list[DischargeNote]]:
    """At most `limit` patients' notes: every patient when they are fewer, else a seeded sample (in patient order)."""
    if len(notes) <= limit:
        return {subject: list(found) for subject, found in notes.items()}
    subjects = sorted(notes)
    chosen = keyed_rng(seed, "noteqa-patients").choice(len(subjects), size=limit, replace=False)
    return {subjects[i]: list(notes[subjects[i]]) for i in sorted(chosen)}


def template_questions(facts: Sequence[AdmissionFacts], notes: Mapping[int, Sequence[DischargeNote]], *, seed: int,
                       notes_source: str) -> list[dict]:
    """One template question per patient (ehrbench.noteqa.generation) over their first three headed notes, as
    records of NOTE_QUESTION_SCHEMA with the checks filled in."""
    headed = {subject: [(note.note_id, note.with_header()) for note in found]
              for subject, found in notes.items()}
    records = [{"question_id": str(item["patient_id"]), "db": NOTES_DATABASE, **item, "generator": "template",
                "notes_source": notes_source} for item in generate_questions(facts, headed, seed=seed)]
    return checked(records, notes)


def checked(records: Iterable[Mapping], notes: Mapping[int, Sequence[DischargeNote]]) -> list[dict]:
    """`records` with the checks' columns and notes_tokens computed from the notes themselves."""
    by_id = {note.note_id: note for found in notes.values() for note in found}
    out = []
    for record in records:
        found = [by_id[note_id] for note_id in record["note_ids"] if note_id in by_id]
        block = notes_block([note.with_header() for note in found])
        choices = [record.get(f"choice_{letter}") for letter in LETTERS]
        correct = record["answer"] in LETTERS and choices[LETTERS.index(record["answer"])]
        out.append({**record, "notes_tokens": count_text(block),
                    "notes_found": len(found) == len(record["note_ids"]) == record["num_notes"] and bool(found),
                    "span_in_notes": bool(record.get("span")) and record["span"] in block,
                    "options_distinct": options_distinct(choices),
                    "answer_is_reference": bool(correct) and correct == record.get("reference_answer")})
    return out


def asked_notes(records: Iterable[Mapping], notes: Mapping[int, Sequence[DischargeNote]]) -> list[DischargeNote]:
    """The notes some question asks over, by patient and position (the agent-facing notes file's rows)."""
    wanted = {note_id for record in records for note_id in record["note_ids"]}
    return [note for subject in sorted(notes) for note in notes[subject][:MAX_NOTES] if note.note_id in wanted]


def write_note_questions(records: Sequence[Mapping], notes: Sequence[DischargeNote], build_dir: Path, *,
                         synthetic: bool) -> dict[str, str]:
    """The suite's files (see the module doc), each written once; their paths relative to the build."""
    build = BuildLayout(build_dir)
    questions = pa.Table.from_pylist([{name: record.get(name) for name in NOTE_QUESTION_SCHEMA.names}
                                      for record in records], schema=NOTE_QUESTION_SCHEMA)
    write_once(build.noteqa_questions, lambda tmp: pq.write_table(questions, tmp))
    notes_file = build.noteqa_notes(synthetic)
    table = pa.Table.from_pylist([note_row(note) for note in notes], schema=NOTE_SCHEMA)
    write_once(notes_file, lambda tmp: pq.write_table(table, tmp))
    export = build.ehrnoteqa_export
    lines = "".join(json.dumps({key: record.get(key) for key in EHRNOTEQA_KEYS}, ensure_ascii=False) + "\n"
                    for record in records)
    write_once(export / "EHRNoteQA.jsonl", lambda tmp: tmp.write_text(lines, encoding="utf-8"))
    discharge = export / ("synthetic_note" if synthetic else "note") / "discharge.csv.gz"
    write_once(discharge, lambda tmp: tmp.write_bytes(discharge_csv(notes)))
    return {"questions": build.relative(build.noteqa_questions), "notes": build.relative(notes_file),
            "ehrnoteqa": build.relative(export / "EHRNoteQA.jsonl"), "discharge": build.relative(discharge),
            "quarantine": build.relative(build.noteqa_quarantine)}


EHRNOTEQA_KEYS = ("patient_id", "category", "num_notes", "clinician", "question",
                  *(f"choice_{letter}" for letter in LETTERS), "answer")


def discharge_csv(notes: Iterable[DischargeNote]) -> bytes:
    """Notes as MIMIC-IV-Note's `discharge.csv.gz` (its columns, minimal quoting, gzip)."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(NOTE_COLUMNS)
    for note in notes:
        row = note_row(note)
        writer.writerow(["" if row[name] is None else row[name] for name in NOTE_COLUMNS])
    return gzip.compress(text.getvalue().encode("utf-8"), mtime=0)


def read_notes_file(path: Path) -> dict[str, DischargeNote]:
    """A build's notes file, by note id."""
    table = pq.read_table(path, columns=["note_id", "subject_id", "hadm_id", "note_seq", "charttime", "text"])
    return {row["note_id"]: DischargeNote(**row) for row in table.to_pylist()}


def note_row(note: DischargeNote) -> dict:
    """A note as a row of NOTE_SCHEMA (MIMIC-IV-Note's columns; every note here is a discharge summary)."""
    return {"note_id": note.note_id, "subject_id": note.subject_id, "hadm_id": note.hadm_id, "note_type": "DS",
            "note_seq": note.note_seq, "charttime": note.charttime, "storetime": None, "text": note.text}

