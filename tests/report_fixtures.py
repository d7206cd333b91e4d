"""Hand-made evaluation runs and build folders for the report tests (unit and browser)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ehrbench.evaluation.results import ResultStore


def trial(agent="a", suite="ehrsql", task="t1", k=0, status="completed", reward=1.0, answerable=True,
          abstained=False, **extra) -> dict:
    correct = None if status == "invalid" else bool(reward == 1.0 and not abstained and answerable)
    return {"build_id": "b1", "suite": suite, "db": "mimic_iv", "task_id": task, "trial": k, "agent": agent,
            "status": status, "reward": reward, "correct": correct, "is_answerable": answerable,
            "abstained": abstained, "transcript": json.dumps([{"role": "assistant", "content": "x"}]), **extra}


def write_run(root: Path, run_id: str, rows: list[dict]) -> Path:
    store = ResultStore(root, run_id)
    store.write(rows)
    return store.folder


def write_build(root: Path) -> Path:
    build = root / "b1"
    (build / "questions").mkdir(parents=True)
    questions = [
        {"question_id": "t1", "suite": "ehrsql", "db": "mimic_iv", "template_id": "labs_1", "category": "labs",
         "is_answerable": True, "question": "What was the last glucose?", "context": None,
         "time_kinds": '{"time": "rel-year-since"}', "extra": None, "gold_sql_duckdb": "select 1",
         "answer_text": "[['1']]", "fhir_ids": None},
        {"question_id": "t2", "suite": "ehrsql", "db": "eicu", "template_id": "labs_1", "category": "labs",
         "is_answerable": True, "question": "q2", "context": None, "time_kinds": "{}", "extra": None,
         "gold_sql_duckdb": "select 2", "answer_text": "[['2']]", "fhir_ids": None},
        {"question_id": "t3", "suite": "ehrsql", "db": "eicu", "template_id": "unanswerable_advice",
         "category": "unanswerable_advice", "is_answerable": False, "question": "q3", "context": None,
         "time_kinds": "{}", "extra": None, "gold_sql_duckdb": None, "answer_text": None, "fhir_ids": None},
        {"question_id": "f1", "suite": "fhir", "db": "mimic_iv", "template_id": "labs_1", "category": "labs",
         "is_answerable": True, "question": "fq", "context": "Assume …", "time_kinds": "{}",
         "extra": '{"fhir_resource_types": ["Observation", "Encounter"]}', "gold_sql_duckdb": "select 1",
         "answer_text": "[['1']]", "fhir_ids": ["id-1", "id-2"]},
    ]
    pq.write_table(pa.Table.from_pylist(questions), build / "questions" / "questions.parquet")
    for task in ("combined", "combined_clues"):
        (build / "dq" / task / "gold").mkdir(parents=True)
        (build / "dq" / task / "instruction.md").write_text(f"Audit {task}")
        pq.write_table(pa.Table.from_pylist([{"table": "lab_results", "row_id": "ab", "cluster_id": "c1",
                                              "family": "inconsistency", "subtype": "in_table_duplicate",
                                              "field": "value", "original_value": "1", "corrupted_value": "2"}]),
                       build / "dq" / task / "gold" / "labels.parquet")
    (build / "manifest.json").write_text(json.dumps({"build_id": "b1", "seed": 0}))
    return build
