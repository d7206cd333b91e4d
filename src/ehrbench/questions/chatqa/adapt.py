"""AdaptQA tasks (`adapt_tasks`): per case and shape, the gold SQL with the user's fallback (`adapt_sql`), renamed
and executed on the renamed database, and the instruction stating the fallback up front."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from ehrbench.ehrsql.scoring import answers_match, format_answer
from ehrbench.questions.chatqa.adapt_cases import _DRUG_SHAPES, _LAB_SHAPES, _adapt_cases, _AdaptCase, _Shape
from ehrbench.questions.chatqa.lay_terms import LayTerms
from ehrbench.questions.chatqa.renamed_database import _EXECUTION_ERRORS, _open, _RenamedDatabase
from ehrbench.questions.chatqa.suite import RENAMED_PROFILE, SUITE, TIMEOUT_S, _task_id
from ehrbench.questions.dialects import UntranspilableSql, to_sqlite
from ehrbench.questions.generate import GeneratedQuestion, current_time_sentence, json_value, run_duckdb
from ehrbench.questions.instantiate import sql_literal
from ehrbench.renaming import SchemaRename
from ehrbench.seeding import keyed_rng


def adapt_tasks(lay_terms: LayTerms, renames: Mapping[str, SchemaRename], seed: int, build_dir: Path,
                current_time: str, *, databases: Iterable[str] = ("mimic_iv", "eicu"), per_shape: int = 2,
                dropped: Counter | None = None) -> list[GeneratedQuestion]:
    """AdaptQA tasks (see the module doc) for each of `databases`: per category the data supports, `per_shape`
    seeded cases per task shape. A case applies when its asked name is absent from the renamed database and its
    fallback present; patient-scoped shapes draw a patient with fallback events."""
    dropped = dropped if dropped is not None else Counter()
    opened = _open(list(databases), renames, build_dir)
    tasks = []
    try:
        for database, db in opened.items():
            for category, cases in _adapt_cases(lay_terms, database, db).items():
                shapes = _DRUG_SHAPES if category != "alternative_lab" else _LAB_SHAPES
                for shape in shapes:
                    rng = keyed_rng(seed, f"{SUITE}|adapt|{database}|{category}|{shape.id}")
                    for index in rng.permutation(len(cases))[:per_shape]:
                        task = _adapt_task(cases[int(index)], shape, database, db, rng, current_time, dropped)
                        if task is not None:
                            tasks.append(task)
    finally:
        for db in opened.values():
            db.close()
    return tasks


def adapt_sql(case: _AdaptCase, shape: _Shape, patient: object | None = None) -> str:
    """The gold SQL (DuckDB, compatibility schema): the asked events if any exist, else the fallback's."""
    s = case.source
    columns = (f"{s.patient} as patient_id, {s.stay} as stay_id, {s.time} as event_time, "
               f"{s.value or 'null'} as value")
    scope = f" and {s.patient} = {sql_literal(patient)}" if shape.patient_scoped else ""
    if case.exact_fallback:
        fallback = " or ".join(f"{s.name} = {sql_literal(name)}" for name in case.fallback)
    else:
        fallback = " or ".join(f"{s.name} like {sql_literal('%' + name + '%')}" for name in case.fallback)
    return (f"with asked as (select {columns} from {s.source} where {s.name} = {sql_literal(case.asked)}{scope}), "
            f"fallback as (select {columns} from {s.source} where ({fallback}){scope}), "
            "chosen as (select asked.patient_id, asked.stay_id, asked.event_time, asked.value from asked "
            "union all select fallback.patient_id, fallback.stay_id, fallback.event_time, fallback.value "
            "from fallback where not exists (select 1 from asked)) "
            f"{shape.select}")


def _adapt_task(case: _AdaptCase, shape: _Shape, database: str, db: _RenamedDatabase, rng: np.random.Generator,
                current_time: str, dropped: Counter) -> GeneratedQuestion | None:
    patient = _draw_patient(case, db, rng) if shape.patient_scoped else None
    if shape.patient_scoped and patient is None:
        dropped["adapt: no patient with fallback events"] += 1
        return None
    sql = adapt_sql(case, shape, patient)
    try:
        gold_duckdb = db.renamed(sql, "duckdb")
        gold_sqlite = db.renamed(to_sqlite(sql), "sqlite")
    except (ValueError, UntranspilableSql):
        dropped["adapt: gold SQL not renamable"] += 1
        return None
    started = time.perf_counter()
    try:
        rows, sqlite_answer = db.run(gold_duckdb, gold_sqlite)
        compat_answer = format_answer(run_duckdb(db.compat, sql, TIMEOUT_S))
    except _EXECUTION_ERRORS:
        dropped["adapt: gold SQL fails"] += 1
        return None
    answer = format_answer(rows)
    # compared as the scorer compares: SQLite may store a whole 94.0 as 94 (NUMERIC affinity)
    if not answers_match(answer, sqlite_answer) or all(cell in (None, 0) for row in rows for cell in row):
        dropped["adapt: dialects differ or nothing found"] += 1
        return None
    subject_words = {"subject": case.subject, "patient": patient}
    ask = shape.ask.format(**subject_words)
    none_found = shape.empty_if.format(**subject_words)
    instruction = (f"Your goal is to explore {case.topic}. Specifically, you want to know {ask}. If "
                   f"{none_found} under the exact name '{case.asked}', you want to ask the same question using "
                   f"{case.fallback_words}.")
    key = f"{database}|{case.category}|{shape.id}|{case.key}|{patient}"
    slot_values = {"asked": case.asked, "fallback": list(case.fallback)} | ({"patient_id": patient} if patient else {})
    return GeneratedQuestion(
        question_id=_task_id("adapt", key), suite=SUITE, db=database, template_id=f"adapt_{case.category}_{shape.id}",
        category="labs" if case.category == "alternative_lab" else "prescriptions", is_answerable=True,
        patient_scoped=shape.patient_scoped, question=instruction, template_question=instruction,
        slot_values=json.dumps(slot_values, default=json_value), slot_texts=json.dumps({}), time_kinds=json.dumps({}),
        current_time=current_time, context=current_time_sentence(current_time), gold_sql_duckdb=gold_duckdb,
        gold_sql_sqlite=gold_sqlite,
        answer=json.dumps(rows, default=json_value), answer_text=answer, answer_rows=len(rows), empty_answer=False,
        empty_by_design=False, max_rows=100, execution_s=round(time.perf_counter() - started, 4),
        execution_error=None, sqlite_answer_text=sqlite_answer, sqlite_error=None,
        extra={"task_type": "adapt", "db_id": f"{RENAMED_PROFILE}/{database}", "adapt_category": case.category,
               "asked": case.asked, "fallback": list(case.fallback), "branch": _branch(case, patient, shape, db),
               "compat_sql": sql, "compat_answer_matches": compat_answer == answer})


def _draw_patient(case: _AdaptCase, db: _RenamedDatabase, rng: np.random.Generator) -> object | None:
    """A patient with fallback events (seeded, from the sorted list), so that the question has an answer."""
    s = case.source
    matches = " or ".join(f"{s.name} = {sql_literal(n)}" if case.exact_fallback else
                          f"{s.name} like {sql_literal('%' + n + '%')}" for n in case.fallback)
    sql = f"select distinct {s.patient} from {s.source} where {matches} order by 1"
    patients = [row[0] for row in db.duckdb.execute(db.renamed(sql, "duckdb")).fetchall()]
    return patients[int(rng.integers(len(patients)))] if patients else None


def _branch(case: _AdaptCase, patient: object | None, shape: _Shape, db: _RenamedDatabase) -> str:
    s = case.source
    scope = f" and {s.patient} = {sql_literal(patient)}" if shape.patient_scoped else ""
    sql = f"select count(*) from {s.source} where {s.name} = {sql_literal(case.asked)}{scope}"
    return "asked" if db.duckdb.execute(db.renamed(sql, "duckdb")).fetchone()[0] else "fallback"
