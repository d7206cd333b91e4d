"""`ehrbench questions check`: generate from templates on a build's databases and say, per template, what went
wrong — the tool for writing templates."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ehrbench.errors import EhrbenchError
from ehrbench.layout import BuildLayout
from ehrbench.questions.generate import GeneratedQuestion, GenerationSettings, generate_questions
from ehrbench.questions.templates import DATABASES, PROFILE_OF, TEMPLATES_DIR, load_templates

DEFAULT_CURRENT_TIME = "2100-12-31 23:59:00"


def build_databases(build_dir: Path, database: str) -> tuple[Path, Path, datetime]:
    """The agent-facing DuckDB and SQLite files of `database` (mimic_iv / eicu) in a build, and its current time."""
    target = PROFILE_OF[database]
    duckdb_path, sqlite_path = target.benchmark.files(build_dir)
    if not duckdb_path.is_file() or not sqlite_path.is_file():
        raise EhrbenchError(f"{build_dir} has no {target.profile}/{target.database} database files "
                            f"({duckdb_path.name}, {sqlite_path.name} under db/{target.profile}/); is it a build "
                            "folder?")
    current = DEFAULT_CURRENT_TIME
    manifest = BuildLayout(build_dir).manifest
    if manifest.is_file():  # an older build's manifest may lack a var group: read it as the JSON it is
        current = json.loads(manifest.read_text()).get("profile_vars", {}).get(target.var_group, {}).get(
            "current_time", current)
    return duckdb_path, sqlite_path, datetime.strptime(current, "%Y-%m-%d %H:%M:%S")


def problems(question: GeneratedQuestion) -> list[str]:
    found = []
    if question.execution_error:
        found.append(f"duckdb: {question.execution_error}")
    elif question.is_answerable:
        if question.sqlite_error:
            found.append(f"sqlite: {question.sqlite_error}")
        elif question.sqlite_answer_text != question.answer_text:
            found.append(f"answers differ: duckdb {question.answer_text[:120]} vs sqlite "
                         f"{(question.sqlite_answer_text or '')[:120]}")
        if question.answer_rows is not None and question.answer_rows > question.max_rows:
            found.append(f"{question.answer_rows} rows > max_rows {question.max_rows}")
    return found


def check_templates(build_dir: Path, databases: list[str] | None = None, prefixes: list[str] | None = None,
                    per_template: int = 5, seed: int = 0, templates_dir: Path | None = None, show: int = 1) -> bool:
    templates = load_templates(templates_dir or TEMPLATES_DIR)
    if prefixes:
        templates = [t for t in templates if any(t.id.startswith(p) for p in prefixes)]
    console = Console(width=200)
    ok = True
    for database in databases or DATABASES:
        if database not in DATABASES:
            raise EhrbenchError(f"unknown database {database!r}; expected one of {DATABASES}")
        duckdb_path, sqlite_path, now = build_databases(build_dir, database)
        settings = GenerationSettings(per_template=per_template, seed=seed, unanswerable_share=None)
        questions = generate_questions(templates, database, duckdb_path, sqlite_path, now, settings)
        by_template: dict[str, list[GeneratedQuestion]] = defaultdict(list)
        for q in questions:
            by_template[q.template_id].append(q)
        table = Table("template", "n", "empty", "failed", "max s", "example / problem", title=f"{database} (now {now})")
        for template in templates:
            if not template.asks(database):
                continue
            items = by_template.get(template.id, [])
            failed = [(q, p) for q in items if (p := problems(q))]
            ok &= not failed
            times = [q.execution_s for q in items if q.execution_s is not None]
            lines = [f"[red]{p[0]}[/]\n  {q.question}\n  {q.gold_sql_duckdb}" for q, p in failed[:2]]
            lines += [f"{q.question} → {(q.answer_text or 'unanswerable')[:100]}" for q in items[:show]]
            if not items:
                lines = ["[yellow]no questions: the values query returned no rows here, or every draw was empty[/]"]
            table.add_row(template.id, str(len(items)), str(sum(q.empty_answer for q in items)), str(len(failed)),
                          f"{max(times):.2f}" if times else "", "\n".join(lines))
        console.print(table)
    return ok
