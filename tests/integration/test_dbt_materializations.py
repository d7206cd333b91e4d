"""The project's table and view materializations (dbt_project/macros/materializations.sql), which replace a model in
place: a real dbt on a throwaway project that has only that macro file, built twice with models that change."""

from __future__ import annotations

import shutil

import duckdb
import pytest
import yaml

from ehrbench.transform import PROJECT_DIR, run_dbt

pytestmark = pytest.mark.integration

PYTHON_MODEL = """
def model(dbt, session):
    dbt.config(materialized="table")
    return session.sql("select {{n}} as p").arrow()
"""


@pytest.fixture
def project(tmp_path):
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "macros").mkdir()
    shutil.copy(PROJECT_DIR / "macros" / "materializations.sql", project / "macros")
    shutil.copy(PROJECT_DIR / "profiles.yml", project)
    (project / "dbt_project.yml").write_text(yaml.safe_dump({
        "name": "replaced", "version": "1.0", "profile": "ehrbench", "config-version": 2,
        "flags": {"send_anonymous_usage_stats": False}}))
    return project


def write_models(project, n: int, kind_of_b: str) -> None:
    models = project / "models"
    # hooks outside the model's transaction, as the FHIR models set and reset DuckDB settings
    (models / "a.sql").write_text(
        "{{ config(materialized='table', pre_hook={'sql': \"insert into main.hooks values ('pre ' || "
        "current_setting('threads'))\", 'transaction': false}, "
        "post_hook={'sql': \"insert into main.hooks values ('post')\", 'transaction': false}) }}\n"
        f"select {n} as x")
    (models / "b.sql").write_text(f"{{{{ config(materialized='{kind_of_b}') }}}}\n"
                                  "select x + 1 as y from {{ ref('a') }}")
    (models / "p.py").write_text(PYTHON_MODEL.replace("{{n}}", str(n * 10)))


def relations(warehouse) -> dict[str, str]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return dict(con.execute("select table_name, table_type from information_schema.tables "
                                "where table_schema = 'main' and table_name <> 'hooks'").fetchall())


def test_a_model_is_replaced_in_place_whatever_it_was_before(project, tmp_path, monkeypatch):
    monkeypatch.setenv("EHRBENCH_CACHE_DIR", str(tmp_path / "cache"))
    warehouse, work = tmp_path / "warehouse.duckdb", tmp_path / "work"
    with duckdb.connect(str(warehouse)) as con:
        con.execute("create table main.hooks (event varchar)")

    write_models(project, 1, "view")
    run = run_dbt(["run"], warehouse=warehouse, work_dir=work, project_dir=project)
    assert relations(warehouse) == {"a": "BASE TABLE", "b": "VIEW", "p": "BASE TABLE"}
    # each node's start and end as dbt timed it: b, which reads a, starts after a ends
    times = {node.unique_id.split(".")[-1]: (node.started, node.ended) for node in run.nodes}
    assert all(started < ended for started, ended in times.values())
    assert times["b"][0] >= times["a"][1]
    assert run.span_seconds >= sum((ended - started).total_seconds() for started, ended in (times["a"], times["b"]))
    ran = work / "target" / "run" / "replaced" / "models"  # the statements dbt ran: the project's, not dbt's own
    assert "create or replace table" in (ran / "a.sql").read_text()
    assert "create or replace view" in (ran / "b.sql").read_text()

    write_models(project, 2, "table")  # new rows, and b changes from a view to a table
    run_dbt(["run"], warehouse=warehouse, work_dir=work, project_dir=project)
    assert relations(warehouse) == {"a": "BASE TABLE", "b": "BASE TABLE", "p": "BASE TABLE"}  # no temporary or
    with duckdb.connect(str(warehouse), read_only=True) as con:  # backup relation left behind
        assert con.execute("select x from a").fetchall() == [(2,)]
        assert con.execute("select y from b").fetchall() == [(3,)]
        assert con.execute("select p from p").fetchall() == [(20,)]
        events = [event for (event,) in con.execute("select event from main.hooks order by rowid").fetchall()]
    assert [e.split()[0] for e in events] == ["pre", "post", "pre", "post"]

    write_models(project, 3, "view")  # and back to a view
    run_dbt(["run"], warehouse=warehouse, work_dir=work, project_dir=project)
    assert relations(warehouse) == {"a": "BASE TABLE", "b": "VIEW", "p": "BASE TABLE"}
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("select y from b").fetchall() == [(4,)]
