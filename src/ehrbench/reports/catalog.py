"""What a report knows about the tasks and the build of a run, read from the build folder into DuckDB:

- `task_text` (suite, task_id, db, question, context, is_answerable, gold_sql, gold_answer, gold_fhir_ids): what a
  task asked and its gold;
- `task_facets` (suite, task_id, facet, value): the breakdowns a task counts in — question category (unanswerable
  questions as one category), template, time expression, database, chatqa task type, FHIR resource type, data-quality
  family and variant, note QA format, level, note count, template and notes source (synthetic or MIMIC-IV-Note).

A run whose build folder is gone still reports: the views are then empty, and pages show task ids only.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from ehrbench.dq.score import read_labels
from ehrbench.layout import BuildLayout
from ehrbench.reports.model import BuildInfo

FACETS_SQL = """
create or replace temp table task_facets as
select suite, question_id as task_id, 'category' as facet,
       case when is_answerable then category else 'unanswerable' end as value from questions
union all select suite, question_id, 'template', template_id from questions where template_id is not null
union all select suite, question_id, 'database', db from questions where db is not null
union all select suite, question_id, 'time_expression',
                 coalesce(nullif(json_extract_string(time_kinds, '$.time'), ''), 'none') from questions
union all select suite, question_id, 'task_type', json_extract_string(extra, '$.task_type')
          from questions where suite = 'chatqa' and json_extract_string(extra, '$.task_type') is not null
union all select suite, task_id, 'fhir_resource_type', resource_type
          from (select suite, question_id as task_id,
                       unnest(json_extract_string(extra, '$.fhir_resource_types[*]')) as resource_type
                from questions where suite = 'fhir' and extra is not null)
union all select 'noteqa', task_id, 'noteqa_format', format from noteqa_tasks
union all select 'noteqa', task_id, 'noteqa_level', category from noteqa_tasks
union all select 'noteqa', task_id, 'noteqa_notes', num_notes::varchar || ' note' || if(num_notes = 1, '', 's')
          from noteqa_tasks
union all select 'noteqa', task_id, 'template', template from noteqa_tasks where template is not null
union all select 'noteqa', task_id, 'notes_source', notes_source from noteqa_tasks
union all select 'dq', task_id, 'dq_family', family from dq_tasks
union all select 'dq', task_id, 'dq_variant', variant from dq_tasks
"""

def register_build(con: duckdb.DuckDBPyConnection, build_dir: Path | None) -> None:
    """Create `task_text` and `task_facets` for `build_dir` (empty when it is None or has no tasks)."""
    questions = BuildLayout(build_dir).questions if build_dir else None
    if questions is not None and questions.is_file():
        con.execute("create or replace temp table questions as select * from read_parquet(?)", [str(questions)])
    else:
        con.execute("""create or replace temp table questions (question_id varchar, suite varchar, db varchar,
                       template_id varchar, category varchar, is_answerable boolean, question varchar,
                       context varchar, time_kinds varchar, extra varchar, gold_sql_duckdb varchar,
                       answer_text varchar, fhir_ids varchar[])""")
    con.execute("create or replace temp table dq_tasks (task_id varchar, instruction varchar, family varchar, "
                "variant varchar)")
    for task in BuildLayout(build_dir).dq_tasks() if build_dir else []:
        task_id = task.task_id
        con.execute("insert into dq_tasks values (?, ?, ?, ?)",
                    [task_id, task.instruction.read_text(), task_id.removesuffix("_clues"),
                     "clues" if task_id.endswith("_clues") else "base"])
    noteqa = BuildLayout(build_dir).noteqa_questions if build_dir else None
    if noteqa is not None and noteqa.is_file():
        con.execute("create or replace temp table note_questions as select * from read_parquet(?)", [str(noteqa)])
    else:
        con.execute("""create or replace temp table note_questions (question_id varchar, db varchar, question varchar,
                       category varchar, num_notes int, template varchar, notes_source varchar, answer varchar,
                       reference_answer varchar)""")
    con.execute("""
        create or replace temp table noteqa_tasks as
        select question_id || '-' || format as task_id, format, db, question, category, num_notes, template,
               notes_source, answer || '. ' || reference_answer as gold_answer
        from note_questions, (values ('multichoice'), ('openended')) formats(format)""")
    con.execute("""
        create or replace temp table task_text as
        select suite, question_id as task_id, db, question, context, is_answerable, gold_sql_duckdb as gold_sql,
               answer_text as gold_answer, coalesce(fhir_ids, []::varchar[]) as gold_fhir_ids from questions
        union all
        select 'dq', task_id, null, instruction, null, null, null, null, []::varchar[] from dq_tasks
        union all
        select 'noteqa', task_id, db, question, null, true, null, gold_answer, []::varchar[] from noteqa_tasks""")
    con.execute(FACETS_SQL)


def task_facets(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], dict[str, list[str]]]:
    """(suite, task_id) -> facet -> values."""
    facets: dict[tuple[str, str], dict[str, list[str]]] = {}
    for suite, task_id, facet, value in con.execute(
            "select suite, task_id, facet, value from task_facets order by all").fetchall():
        facets.setdefault((suite, task_id), {}).setdefault(facet, []).append(value)
    return facets


def dq_labels(build_dir: Path | None, task_id: str) -> list[dict]:
    """The hidden labels of a data-quality task (the report is for the benchmark's authors, not its agents)."""
    task = BuildLayout(build_dir).dq_task(task_id) if build_dir else None
    if task is None or not task.labels.is_file():
        return []
    return read_labels(task.root)


def build_info(build_dir: Path | None, build_id: str) -> BuildInfo | None:
    """The build's manifest and quarantine (None when the build folder is gone)."""
    build = BuildLayout(build_dir) if build_dir is not None else None
    if build is None or not build.manifest.is_file():
        return None
    manifest = json.loads(build.manifest.read_text())
    quarantine: list[dict] = []
    for path in sorted(build.quarantine.glob("*.parquet")):
        columns = [c for c in ("question_id", "suite", "db", "template_id", "failed_expectations")
                   if c in pq.read_schema(path).names]
        quarantine += [{**row, "artefact": path.stem} for row in pq.read_table(path, columns=columns).to_pylist()]
    data_docs = "gx/index.html" if build.gx_index.is_file() else None
    return BuildInfo(build_id=manifest.get("build_id", build_id), manifest=manifest, quarantine=quarantine,
                     data_docs=data_docs)

