"""The EHR-ChatQA export of the chatqa tasks (`chatqa_export`): task files per database and task type, written once."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from ehrbench.layout import BuildLayout, write_once
from ehrbench.questions.chatqa.suite import SUITE
from ehrbench.questions.generate import GeneratedQuestion

# EHR-ChatQA's environment names for its renamed databases (our `renamed` profile rebuilds them,
# docs/benchmarks.md#ehr-chatqa-renamed-schemas)
CHATQA_DB_IDS = {"mimic_iv": "mimic_iv_star", "eicu": "eicu_star"}


def chatqa_export(tasks: Iterable[GeneratedQuestion], build_dir: Path) -> dict[str, str]:
    """`exports/chatqa/<db>_{incre,adapt}.json` in EHR-ChatQA's task format ({task_id, task_type, db_id,
    instruction, gold_sql: SQLite over the renamed schema, gold_answer: rows}), plus `task_ids.json` mapping each
    file's task ids to question ids. db_id is EHR-ChatQA's name for the renamed database (mimic_iv_star, eicu_star),
    so that their agents and scorers pick the right environment. Written once: refuses to overwrite."""
    groups: dict[str, list[GeneratedQuestion]] = {}
    for task in tasks:
        if task.suite == SUITE:
            groups.setdefault(f"{task.db}_{task.extra['task_type']}", []).append(task)
    folder = BuildLayout(build_dir).chatqa_export
    names = [f"{group}.json" for group in sorted(groups)] + ["task_ids.json"]
    if existing := [name for name in names if (folder / name).exists()]:
        raise FileExistsError(f"{folder}: {existing} exist; chatqa exports of a build are written once")
    files, ids = {}, {}
    for group, items in sorted(groups.items()):
        records = [{"task_id": str(n), "task_type": t.extra["task_type"], "db_id": CHATQA_DB_IDS[t.db],
                    "instruction": t.question, "gold_sql": t.gold_sql_sqlite, "gold_answer": json.loads(t.answer)}
                   for n, t in enumerate(items)]
        ids[group] = {str(n): t.question_id for n, t in enumerate(items)}
        files[group] = _write_json(folder / f"{group}.json", records, build_dir)
    files["task_ids"] = _write_json(folder / "task_ids.json", ids, build_dir)
    return files


def _write_json(path: Path, content: object, build_dir: Path) -> str:
    text = json.dumps(content, ensure_ascii=False, indent=4) + "\n"
    write_once(path, lambda tmp: tmp.write_text(text))
    return str(path.relative_to(build_dir))
