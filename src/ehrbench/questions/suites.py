"""Write a build's question sets: one table of every question, and exports in the published formats.

    questions/questions.parquet         one row per question and suite (QUESTION_SCHEMA): gold SQL in both dialects,
                                        answers, slots, paraphrase source; FHIR rows carry fhir_ids and context
    exports/ehrsql2024/data.json        EHRSQL-2024's format ({"version", "data": [{"id", "question"}]}),
    exports/ehrsql2024/label.json       id -> SQLite gold SQL for db/ehrsql2024/mimic_iv.sqlite, or "null"
    exports/ehrsql2024/answer.json      id -> answer string (ehrbench.ehrsql.scoring.format_answer), or "null"

The FHIR suite (FHIR-AgentBench style) asks the single-patient MIMIC-IV questions whose gold could be grounded in
FHIR resources (status mapped, or empty: the answer needs no resource), each with the resource ids its answer needs
and the current-time sentence its relative time expressions are read against. Its rows are copies of the ehrsql
rows with suite "fhir" and their own question ids (the ehrsql question's id is kept in `extra`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ehrbench.fhir.ground_truth import Grounding
from ehrbench.layout import BuildLayout, write_once
from ehrbench.questions.generate import QUESTION_SCHEMA, GeneratedQuestion, current_time_sentence

FHIR_DATABASE = "mimic_iv"
EHRSQL2024_VERSION = "ehrbench_v1"


def fhir_questions(questions: Iterable[GeneratedQuestion], groundings: Iterable[Grounding]) -> list[GeneratedQuestion]:
    """The FHIR suite's rows: grounded single-patient MIMIC-IV questions with their resource ids and context."""
    grounded = {g.question_id: g for g in groundings if g.status in ("mapped", "empty")}
    rows = []
    for q in questions:
        grounding = grounded.get(q.question_id)
        if grounding is None or q.suite != "ehrsql" or q.db != FHIR_DATABASE or not q.patient_scoped:
            continue
        rows.append(replace(
            q, question_id=hashlib.sha1(f"fhir|{q.question_id}".encode()).hexdigest()[:24], suite="fhir",
            fhir_ids=list(grounding.resource_ids), context=current_time_sentence(q.current_time),
            extra={**q.extra, "ehrsql_question_id": q.question_id, "fhir_resource_types": grounding.resource_types}))
    return rows


def write_questions(questions: Iterable[GeneratedQuestion], build_dir: Path) -> str:
    path = BuildLayout(build_dir).questions
    table = pa.Table.from_pylist([q.to_dict() for q in questions], schema=QUESTION_SCHEMA)
    write_once(path, lambda tmp: pq.write_table(table, tmp))
    return str(path.relative_to(build_dir))


def write_ehrsql2024_export(questions: Iterable[GeneratedQuestion], build_dir: Path) -> dict[str, str]:
    """The MIMIC-IV ehrsql questions in EHRSQL-2024's files, so its scorer and agents run on them unchanged."""
    items = [q for q in questions if q.suite == "ehrsql" and q.db == FHIR_DATABASE]
    folder = BuildLayout(build_dir).ehrsql2024_export
    contents = {
        "data.json": {"version": EHRSQL2024_VERSION,
                      "data": [{"id": q.question_id, "question": q.question} for q in items]},
        "label.json": {q.question_id: q.gold_sql_sqlite if q.is_answerable else "null" for q in items},
        "answer.json": {q.question_id: q.answer_text if q.is_answerable else "null" for q in items},
    }
    files = {}
    for name, content in contents.items():
        text = json.dumps(content, ensure_ascii=False, indent=1) + "\n"
        write_once(folder / name, lambda tmp, text=text: tmp.write_text(text))
        files[name.removesuffix(".json")] = str((folder / name).relative_to(build_dir))
    return files
