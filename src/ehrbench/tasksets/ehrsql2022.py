"""Format `ehrsql`: EHRSQL (2022)'s eICU question files (`dataset/ehrsql/eicu/{train,valid,test}.json` of
glee4810/EHRSQL): a JSON list of {id, db_id: "eicu", question, query (SQLite; "null" when unanswerable),
is_impossible, template, value, …}. Runs on the build's `ehrsql_eicu/eicu` database — a build made with
`--eicu-preset ehrsql2022` (docs/benchmarks.md#ehrsql-eicu-database) — with the `ehrsql` agent suite, scored by
EHRSQL (2022)'s rules (protocol `ehrsql2022`, docs/benchmarks.md#ehrsql-answerability-and-execution-f1).

Queries are prepared and answers compared as EHRSQL's scorer does (`ehrbench.scoring.ehrsql2022`: the query
lower-cased, the current time — 2105-12-31 23:59:00 — and the vital-sign ranges put in; a result is its rows as
text, sorted). The published files hold no answers: EHRSQL was built on the full eICU, whose database is not
published with them; an item may carry its own `answer` (the scorer's result text, or rows), compared only on a build
of the full eICU. On the demo every answer is recomputed on the build (every gold SQL must still
execute)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ehrbench.errors import ConfigError
from ehrbench.scoring.ehrsql2022 import CURRENT_TIME, post_process_sql, result_text
from ehrbench.tasksets.formats import BuildInfo, TaskFormat
from ehrbench.tasksets.model import ImportedTask
from ehrbench.tasksets.reading import field, item_id, kind_of, read_json, require_kind

PRESET = "ehrsql2022"  # its current time is the scorer's default, CURRENT_TIME
ITEMS = "an EHRSQL question file: a JSON list of {id, db_id, question, query, is_impossible, …}"


class Ehrsql2022Format(TaskFormat):
    name = "ehrsql"
    protocol = "ehrsql2022"
    suite = "ehrsql"
    profile = "ehrsql_eicu"
    summary = "EHRSQL (2022) eICU question file (JSON list) on ehrsql_eicu/eicu of an --eicu-preset ehrsql2022 build"

    def read(self, paths: Sequence[Path]) -> list[ImportedTask]:
        if not paths:
            raise ConfigError(f"no file given; expected {ITEMS}")
        return [task for path in paths for task in self._read_file(Path(path))]

    def _read_file(self, path: Path) -> list[ImportedTask]:
        items = require_kind(read_json(path, ITEMS), list, path, ITEMS)
        tasks = []
        for index, item in enumerate(items):
            key = item_id(item, index, path, "id", ITEMS)
            db_id = item.get("db_id", "eicu")
            if db_id != "eicu":
                raise ConfigError(f"{path}: task {key}: db_id {db_id!r}; expected 'eicu' (ehrbench builds EHRSQL's "
                                  f"eICU database, not its MIMIC-III one)")
            question = field(item, "question", path, key, expected="the question text")
            sql = field(item, "query", path, key, expected='its gold SQL, or "null" when unanswerable')
            answerable = sql.strip().lower() not in ("null", "nan", "")
            if "is_impossible" in item and item["is_impossible"] is answerable:
                raise ConfigError(f"{path}: task {key}: is_impossible is {str(item['is_impossible']).lower()} but "
                                  f"its query is {'a query' if answerable else 'null'}; expected them to agree")
            tasks.append(ImportedTask(key, path.name, question, "eicu", answerable, sql if answerable else None,
                                      _published(item, path, key) if answerable else None,
                                      template=item.get("q_tag") or item.get("template")))
        return tasks

    def requires(self) -> dict[str, str]:
        return {"eicu_preset": PRESET}

    def check_build(self, build: BuildInfo) -> list[str]:
        preset = build.eicu_preset
        if preset is None:
            return [f"build {build.build_id} records no eicu_preset; EHRSQL (2022) tasks need one made with "
                    f"--eicu-preset {PRESET}"]
        if preset != PRESET:
            raise ConfigError(f"--build: build {build.build_id} was made with --eicu-preset {preset}; EHRSQL (2022) "
                              f"tasks need its eICU database as EHRSQL built it: build with --eicu-preset {PRESET}")
        return []

    def not_compared(self, build: BuildInfo) -> str | None:
        if build.edition("eicu") != "full":
            return (f"EHRSQL (2022) was built on the full eICU; on the eICU {build.edition('eicu') or 'demo'} its "
                    f"answers are recomputed")
        return None

    def current_time(self, build: BuildInfo, target) -> str | None:
        return build.current_time(target.profile) or CURRENT_TIME

    def prepare_sql(self, sql: str, current_time: str | None) -> str:
        return post_process_sql(sql, current_time or CURRENT_TIME)

    def answer_form(self, rows: list[list]) -> str:
        return result_text(rows)

    def agrees(self, rows: list[list], published: str) -> bool:
        return self.answer_form(rows) == published


def _published(item: dict, path: Path, key: str) -> str | None:
    """An item's own answer, in the scorer's form (not part of the published files)."""
    answer = item.get("answer")
    if answer is None:
        return None
    if isinstance(answer, str):
        return answer
    if isinstance(answer, list) and all(isinstance(row, list) and row for row in answer):
        return result_text(answer)
    raise ConfigError(f"{path}: task {key}: answer is {kind_of(answer)}; expected the scorer's answer string or "
                      f"rows ({json.dumps([['value']])})")
