"""Format `ehrsql2024`: a split folder of the EHRSQL-2024 shared task (`data.json`: {"data": [{id, question}]};
`label.json`: id → gold SQL or "null" (unanswerable); optional `answer.json`: id → the answer string; optional
`annotated.json`: the template of each question). Runs on the build's `ehrsql2024/mimic_iv` database with the
`ehrsql` agent suite, scored by EHRSQL-2024's rules: the scorer's SQL preprocessing
(docs/benchmarks.md#ehrsql-2024-reproduction-check), then its answer comparison
(docs/benchmarks.md#ehrsql-2024-answer-comparison-and-reliability-score)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ehrbench.ehrsql.scoring import answers_match, format_answer, prepare_gold_sql
from ehrbench.errors import ConfigError
from ehrbench.tasksets.formats import TaskFormat, one_folder
from ehrbench.tasksets.model import ImportedTask
from ehrbench.tasksets.reading import field, item_id, kind_of, read_json, require_kind

FOLDER = "an EHRSQL-2024 split folder with data.json and label.json (answer.json optional)"
DATA = 'data.json: {"data": [{"id", "question"}, …]}'
LABELS = 'label.json: an object mapping every question id of data.json to its SQL or "null"'
ANSWERS = 'answer.json: an object mapping every question id of data.json to its answer string or "null"'


class Ehrsql2024Format(TaskFormat):
    name = "ehrsql2024"
    protocol = "ehrsql2024"
    suite = "ehrsql"
    profile = "ehrsql2024"
    summary = "EHRSQL-2024 split folder (data.json, label.json, answer.json) on ehrsql2024/mimic_iv"

    def read(self, paths: Sequence[Path]) -> list[ImportedTask]:
        folder = one_folder(paths, FOLDER)
        data_path, label_path, answer_path = folder / "data.json", folder / "label.json", folder / "answer.json"
        data = require_kind(read_json(data_path, DATA), dict, data_path, DATA)
        items = require_kind(data.get("data"), list, data_path, DATA)
        labels = require_kind(read_json(label_path, LABELS), dict, label_path, LABELS)
        answers = (require_kind(read_json(answer_path, ANSWERS), dict, answer_path, ANSWERS)
                   if answer_path.exists() else None)
        templates = _templates(folder / "annotated.json")
        tasks = []
        for index, item in enumerate(items):
            key = item_id(item, index, data_path, "id", '{"id", "question"}')
            question = field(item, "question", data_path, key, expected="the question text")
            sql = labels.get(key)
            if not isinstance(sql, str):
                problem = "no gold SQL" if sql is None else f"its gold SQL is {kind_of(sql)}"
                raise ConfigError(f"{label_path}: task {key}: {problem}; expected \"null\" or a query for every "
                                  f"question of data.json")
            answerable = sql.strip().lower() != "null"
            published = None
            if answers is not None and answerable:
                if key not in answers:
                    raise ConfigError(f"{answer_path}: task {key}: no answer; expected an answer string for every "
                                      f"answerable question of data.json")
                published = answers[key]
                if not isinstance(published, str):
                    raise ConfigError(f"{answer_path}: task {key}: its answer is {kind_of(published)}; expected the "
                                      f"answer string, e.g. \"[['iv']]\"")
            tasks.append(ImportedTask(key, label_path.name, question, "mimic_iv", answerable,
                                      sql if answerable else None, published, template=templates.get(key)))
        return tasks

    def default_name(self, paths: Sequence[Path]) -> str:
        return f"{self.name}-{Path(paths[0]).resolve().name}"  # the split: ehrsql2024-valid

    def prepare_sql(self, sql: str, current_time: str | None) -> str:
        return prepare_gold_sql(sql, current_time) if current_time else prepare_gold_sql(sql)

    def answer_form(self, rows: list[list]) -> str:
        return format_answer(rows)

    def agrees(self, rows: list[list], published: str) -> bool:
        return answers_match(rows, published)


def _templates(path: Path) -> dict[str, str]:
    """Question id → template, from annotated.json when the folder has it (optional: a facet, not a task field)."""
    if not path.is_file():
        return {}
    items = read_json(path, "annotated.json: a list of {id, question, template, val_dict}")
    if not isinstance(items, list):
        return {}
    return {str(i["id"]): str(i["template"]) for i in items
            if isinstance(i, dict) and i.get("id") is not None and i.get("template")}
