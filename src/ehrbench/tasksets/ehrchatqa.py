"""Format `ehrchatqa`: EHR-ChatQA task files (glee4810/EHR-ChatQA `src/envs/<db_id>/eval_{incre,adapt}.jsonl`, and
`exports/chatqa/<db>_{incre,adapt}.json` of every ehrbench build): a JSON list (or JSON Lines) of {task_id,
task_type: incre | adapt, db_id: mimic_iv_star | eicu_star, instruction, gold_sql (SQLite over the renamed schema),
gold_answer: rows}. Runs on the build's `renamed/<database>` databases with the `chatqa` agent suite (a simulated user
with the instruction), scored by EHR-ChatQA's rules (protocol `ehrchatqa`, docs/benchmarks.md#repeated-trials).

A task's id is `<db_id>-<task_type>-<task_id>`, the key EHR-ChatQA's metric script counts trials by (task ids repeat
across its files). Published answers are compared as EHR-ChatQA's environment does: numbers rounded to 4 decimals,
text lower-cased, rows sorted, the first 100; an AdaptQA answer written in words ("three", "twenty-eight") is read as
its number."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from ehrbench.errors import ConfigError
from ehrbench.tasksets.formats import BuildInfo, TaskFormat
from ehrbench.tasksets.model import ImportedTask, Target
from ehrbench.tasksets.reading import field, item_id, read_json, require_kind

DATABASES = {"mimic_iv_star": "mimic_iv", "eicu_star": "eicu"}  # EHR-ChatQA's environments → our databases
CURRENT_TIME_OF = {"mimic_iv": "ehrsql2024", "eicu": "ehrsql_eicu"}  # renamed profiles keep their source's 'now'
TASK_TYPES = ("incre", "adapt")
ITEMS = "an EHR-ChatQA task file: a JSON list of {task_id, task_type, db_id, instruction, gold_sql, gold_answer}"
MAX_ROWS = 100


class EhrChatQaFormat(TaskFormat):
    name = "ehrchatqa"
    protocol = "ehrchatqa"
    suite = "chatqa"
    profile = "renamed"
    summary = "EHR-ChatQA task files (JSON list or JSON Lines) on renamed/mimic_iv and renamed/eicu"

    def read(self, paths: Sequence[Path]) -> list[ImportedTask]:
        if not paths:
            raise ConfigError(f"no file given; expected {ITEMS}")
        return [task for path in paths for task in self._read_file(Path(path))]

    def _read_file(self, path: Path) -> list[ImportedTask]:
        items = require_kind(read_json(path, ITEMS, lines=True), list, path, ITEMS)
        tasks = []
        for index, item in enumerate(items):
            number = item_id(item, index, path, "task_id", ITEMS)
            task_type = field(item, "task_type", path, number, expected=" or ".join(TASK_TYPES))
            db_id = field(item, "db_id", path, number, expected=" or ".join(DATABASES))
            if task_type not in TASK_TYPES:
                raise ConfigError(f"{path}: task {number}: task_type {task_type!r}; expected incre or adapt")
            if db_id not in DATABASES:
                raise ConfigError(f"{path}: task {number}: db_id {db_id!r}; expected mimic_iv_star or eicu_star")
            key = f"{db_id}-{task_type}-{number}"
            instruction = field(item, "instruction", path, key, expected="the simulated user's instruction")
            sql = field(item, "gold_sql", path, key, expected="the gold SQL (SQLite)")
            answer = field(item, "gold_answer", path, key, list, expected="the gold answer as a list of rows")
            tasks.append(ImportedTask(key, path.name, instruction, DATABASES[db_id], True, sql,
                                      json.dumps(answer, ensure_ascii=False), task_type=task_type))
        return tasks

    def default_name(self, paths: Sequence[Path]) -> str:
        stems = [Path(p).stem for p in paths]
        return f"{self.name}-{stems[0]}" + (f"-and-{len(stems) - 1}-more" if len(stems) > 1 else "")

    def current_time(self, build: BuildInfo, target: Target) -> str | None:
        return build.current_time(CURRENT_TIME_OF[target.database])

    def answer_form(self, rows: list[list]) -> str:
        return str(normalised(rows))

    def agrees(self, rows: list[list], published: str) -> bool:
        try:
            gold = json.loads(published)
        except json.JSONDecodeError:
            return False
        return isinstance(gold, list) and normalised(rows) == normalised(gold)


def normalised(rows: list) -> list[list[str]]:
    """Rows as EHR-ChatQA compares them (see the module's docstring)."""
    return sorted([[_cell(cell) for cell in (row if isinstance(row, list) else [row])] for row in rows])[:MAX_ROWS]


def _cell(cell: object) -> str:
    if isinstance(cell, str):
        spelled = number_from_words(cell)
        cell = spelled if spelled is not None else cell.strip().lower()
    if isinstance(cell, bool):
        cell = int(cell)
    if isinstance(cell, (int, float)):
        value = round(float(cell), 4)
        return str(int(value)) if value.is_integer() else str(value)
    try:
        return _cell(float(cell)) if isinstance(cell, str) and cell not in ("nan", "inf", "-inf") else str(cell)
    except ValueError:
        return str(cell)


_UNITS = {word: n for n, word in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"))}
_TENS = {word: 10 * n for n, word in enumerate(
    ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"), 2)}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}


def number_from_words(text: str) -> int | None:
    """'twenty-eight' → 28, 'two hundred and forty-seven' → 247; None when the text is not a number in words."""
    words = [w for w in re.split(r"[\s-]+", text.strip().lower()) if w and w != "and"]
    if not words:
        return None
    total = current = 0
    for word in words:
        if word in _UNITS:
            current += _UNITS[word]
        elif word in _TENS:
            current += _TENS[word]
        elif word == "hundred":
            current = max(current, 1) * 100
        elif word in _SCALES:
            total += max(current, 1) * _SCALES[word]
            current = 0
        else:
            return None
    return total + current
