"""Loading the tasks of a build's suites (the types are ehrbench.tasks'), split into what an agent sees (`TaskView`)
and the gold it is scored against (`Gold`). Suites: `ehrsql` and `chatqa` (questions over a database), `fhir`
(questions over the FHIR resources, with resource-id ground truth), `dq` (data-quality audits: the task folder's
instruction and data)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from ehrbench.errors import ConfigError, MissingInputError
from ehrbench.fhir.ids import resource_id
from ehrbench.layout import BuildLayout
from ehrbench.questions.templates import PROFILE_OF
from ehrbench.seeding import keyed_rng
from ehrbench.tasks import SUITES, EvalTask, Gold, TaskView


def load_tasks(build_dir: Path, suites: tuple[str, ...] = SUITES, limit: int | None = None,
               seed: int = 0) -> list[EvalTask]:
    """The tasks of `suites` in a build; with `limit`, a seeded sample of that many tasks per suite (the same
    sample for the same seed, whatever else changes)."""
    unknown = sorted(set(suites) - set(SUITES))
    if unknown:
        raise ConfigError(f"unknown suite(s) {', '.join(unknown)}; expected some of {', '.join(SUITES)}")
    layout = BuildLayout(build_dir)
    tasks: list[EvalTask] = []
    for suite in suites:
        found = _dq_tasks(layout) if suite == "dq" else _question_tasks(layout, suite)
        if limit is not None and len(found) > limit:
            chosen = keyed_rng(seed, "evaluation", suite).choice(len(found), size=limit, replace=False)
            found = [found[i] for i in sorted(chosen)]
        tasks += found
    return tasks


def _question_tasks(layout: BuildLayout, suite: str) -> list[EvalTask]:
    path = layout.questions
    if not path.is_file():
        raise MissingInputError(f"{path}: no questions; expected a build folder with questions/questions.parquet")
    columns = ["question_id", "suite", "db", "question", "context", "is_answerable", "answer_text",
               "gold_sql_duckdb", "fhir_ids", "slot_values"]
    rows = [r for r in pq.read_table(path, columns=columns).to_pylist() if r["suite"] == suite]
    tasks = []
    for row in sorted(rows, key=lambda r: r["question_id"]):
        compatible = PROFILE_OF[row["db"]]
        # EHR-ChatQA's tasks run on the renamed schema
        profile = "renamed" if suite == "chatqa" else compatible.profile
        patient = json.loads(row["slot_values"] or "{}").get("patient_id")
        view = TaskView(suite, row["question_id"], row["db"], row["question"], row["context"],
                        database=layout.database_files(profile, compatible.database)[0],
                        fhir_resources=layout.fhir_resources if suite == "fhir" else None,
                        patient_fhir_id=resource_id("Patient", patient) if suite == "fhir" and patient else None)
        gold = Gold(bool(row["is_answerable"]), row["answer_text"], row["gold_sql_duckdb"],
                    tuple(row["fhir_ids"] or ()))
        tasks.append(EvalTask(view, gold))
    return tasks


def _dq_tasks(layout: BuildLayout) -> list[EvalTask]:
    return [EvalTask(TaskView("dq", task.task_id, None, task.instruction.read_text(), data_dir=task.data),
                     Gold(dq_task_dir=task.root))
            for task in layout.dq_tasks()]
