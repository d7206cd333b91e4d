"""IncreQA tasks (`incre_tasks`): executed ehrsql questions whose item has a lay term, the items chosen and named, the
gold SQL renamed and re-executed on the renamed database."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from ehrbench.ehrsql.scoring import answers_match, format_answer
from ehrbench.questions.chatqa.incre_instruction import _SpokenItem, incre_instruction
from ehrbench.questions.chatqa.lay_terms import LayTerms
from ehrbench.questions.chatqa.renamed_database import _EXECUTION_ERRORS, _open, _RenamedDatabase
from ehrbench.questions.chatqa.stored_values import item_kind
from ehrbench.questions.chatqa.suite import RENAMED_PROFILE, SUITE, _task_id
from ehrbench.questions.generate import GeneratedQuestion, current_time_sentence, json_value
from ehrbench.questions.templates import Template
from ehrbench.renaming import SchemaRename
from ehrbench.seeding import keyed_rng

# Databases whose renamed profile holds the compatibility profile's rows under other names: there a different answer
# is a renaming fault. renamed/eicu follows EHR-ChatQA's own eICU preprocessing (all patients, ages "> 89" as 90, …;
# docs/benchmarks.md#ehr-chatqa-eicu-database), so its answers may differ from ehrsql_eicu's: the gold is its own.
SAME_DATA_AS_COMPATIBLE = frozenset({"mimic_iv"})


def incre_tasks(questions: Iterable[GeneratedQuestion], templates: Iterable[Template],
                renames: Mapping[str, SchemaRename], lay_terms: LayTerms, seed: int, build_dir: Path,
                *, dropped: Counter | None = None) -> list[GeneratedQuestion]:
    """IncreQA tasks (see the module doc) for the answerable, executed, non-empty ehrsql `questions` with an item
    that has a lay term (or, for a drug, a brand name the data does not use). `renames`: schema_renames(seed) (the
    `renamed/<db>` maps are used); `build_dir` holds db/renamed/<db>.duckdb|.sqlite. Reasons for dropping a
    candidate are counted in `dropped`."""
    dropped = dropped if dropped is not None else Counter()
    by_id = {t.id: t for t in templates}
    candidates = [q for q in questions if _executed(q) and q.template_id in by_id]
    databases = _open(sorted({q.db for q in candidates}), renames, build_dir)
    tasks = []
    try:
        for question in candidates:
            db = databases[question.db]
            items = _spoken_items(question, lay_terms, db)
            if not items:
                continue
            rng = keyed_rng(seed, f"{SUITE}|incre|{question.question_id}")
            task = _incre_task(question, by_id[question.template_id], items, db, rng, dropped)
            if task is not None:
                tasks.append(task)
    finally:
        for db in databases.values():
            db.close()
    return tasks


def _executed(q: GeneratedQuestion) -> bool:
    return (q.suite == "ehrsql" and q.is_answerable and q.answer is not None and not q.execution_error
            and not q.empty_answer and q.gold_sql_sqlite is not None and not q.sqlite_error)


def _spoken_items(question: GeneratedQuestion, lay_terms: LayTerms, db: _RenamedDatabase) -> list[_SpokenItem]:
    items = []
    for slot, value in json.loads(question.slot_values).items():
        kind = item_kind(slot)
        if kind is None or not isinstance(value, str):
            continue
        used = db.used_values(kind)
        if kind == "drugs":
            pair = lay_terms.brand_for(value)
            # a brand the data also records would name another value: asking by it would be ambiguous
            if pair is None or pair.brand in used:
                continue
            names, same = [pair.brand[:1].upper() + pair.brand[1:]], set(pair.generic_names)
        else:
            term = lay_terms.term_for(kind, value)
            names = term.names_for(value) if term else []
            if not names:
                continue
            same = set(term.values)
        # a name that is another stored value would point the agent at that value
        names = [n for n in names if n.lower() not in used]
        if not names:
            continue
        similar = _near_duplicates(value, used, same)
        items.append(_SpokenItem(slot, kind, value, names[0], tuple(names[:3]), tuple(similar)))
    return items


def _near_duplicates(value: str, used: set[str], same_concept: set[str], limit: int = 3) -> list[str]:
    """Stored values an agent could mistake for `value`: containing it, contained in it, or of the same concept."""
    similar = {v for v in used if v != value and (value in v or (len(v) >= 4 and v in value) or v in same_concept)}
    return sorted(similar, key=lambda v: (len(v), v))[:limit]


def _incre_task(question: GeneratedQuestion, template: Template, items: list[_SpokenItem], db: _RenamedDatabase,
                rng: np.random.Generator, dropped: Counter) -> GeneratedQuestion | None:
    try:
        gold_duckdb = db.renamed(question.gold_sql_duckdb, "duckdb")
        gold_sqlite = db.renamed(question.gold_sql_sqlite, "sqlite")
    except ValueError:
        dropped["incre: gold SQL not renamable"] += 1
        return None
    started = time.perf_counter()
    try:
        rows, sqlite_answer = db.run(gold_duckdb, gold_sqlite)
    except _EXECUTION_ERRORS:
        dropped["incre: renamed gold SQL fails"] += 1
        return None
    answer = format_answer(rows)
    if not answers_match(sqlite_answer, answer):  # as the scorer compares: SQLite may store 94.0 as 94 (NUMERIC)
        dropped["incre: DuckDB and SQLite answers differ on the renamed database"] += 1
        return None
    if question.db in SAME_DATA_AS_COMPATIBLE and answer != question.answer_text:
        dropped["incre: answer differs on the renamed database"] += 1  # the same rows: a renaming fault
        return None
    if rows == [] and question.answer_text != format_answer([]):
        dropped["incre: no answer on the renamed database"] += 1
        return None
    instruction, lay_question = incre_instruction(question, template, items, rng)
    return GeneratedQuestion(
        question_id=_task_id("incre", question.question_id), suite=SUITE, db=question.db,
        template_id=question.template_id, category=question.category, is_answerable=True,
        patient_scoped=question.patient_scoped, question=instruction, template_question=lay_question,
        slot_values=question.slot_values, slot_texts=question.slot_texts, time_kinds=question.time_kinds,
        current_time=question.current_time, context=current_time_sentence(question.current_time),
        gold_sql_duckdb=gold_duckdb, gold_sql_sqlite=gold_sqlite,
        answer=json.dumps(rows, default=json_value), answer_text=answer, answer_rows=len(rows),
        empty_answer=False, empty_by_design=False, max_rows=question.max_rows,
        execution_s=round(time.perf_counter() - started, 4), execution_error=None, sqlite_answer_text=sqlite_answer,
        sqlite_error=None,
        extra={"task_type": "incre", "db_id": f"{RENAMED_PROFILE}/{question.db}",
               "source_question_id": question.question_id, "compat_answer_matches": answer == question.answer_text,
               "lay_terms": {i.slot: {"stored": i.stored, "said": i.name, "terms": list(i.terms),
                                      "similar": list(i.similar)} for i in items}})
