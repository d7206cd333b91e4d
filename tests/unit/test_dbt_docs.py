"""Every agent-facing dbt model and every column it returns has a `description:` in its YAML, so that the dbt docs
site (`make docs`) explains each table an agent can query. No dbt run and no DuckDB: the columns are read from the
models' outermost select lists (a model that is one macro call is read through the macro), the FHIR models' columns
are the export's `RESOURCE_COLUMNS`, and renamed_random's columns are drawn per build (only its models are checked).

Agent-facing: the database profiles exported to `db/` (ehrsql2024, ehrsql_eicu, renamed, renamed_random), the FHIR
view exported to `fhir/` and the audit extract the dq tasks are written from — not intermediate/, staging or lineage.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
import yaml

from ehrbench.fhir.export import RESOURCE_COLUMNS

DBT = Path(__file__).resolve().parents[2] / "dbt_project"
MODELS = DBT / "models"
AGENT_FACING = ("ehrsql2024", "ehrsql_eicu", "renamed", "renamed_random", "fhir", "dq")
DRAWN_COLUMNS = ("renamed_random",)  # column names drawn per build: no fixed names to describe


@cache
def agent_facing_models() -> dict[str, Path]:
    """model name -> SQL file, for the top-level models of the agent-facing folders."""
    return {sql.stem: sql for folder in AGENT_FACING for sql in sorted((MODELS / folder).rglob("*.sql"))
            if "intermediate" not in sql.parts}


@cache
def yaml_models() -> dict[str, dict]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    models: dict[str, dict] = {}
    for path in sorted(MODELS.rglob("*.yml")):
        for model in (yaml.load(path.read_text(), Loader=loader) or {}).get("models", []):
            models[model["name"]] = model
    return models


# --- a small reader of select lists (enough for this project's models; Jinja calls are opaque units) ---------------

_JINJA_COMMENT = re.compile(r"\{#.*?#\}", re.S)
_CONFIG = re.compile(r"\{\{\s*config\(.*?\)\s*\}\}", re.S)
_LINE_COMMENT = re.compile(r"--[^\n]*")
_MACRO_CALL = re.compile(r"^\{\{\s*(\w+)\(.*?\)\s*\}\}", re.S)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _strip(sql: str) -> str:
    return _LINE_COMMENT.sub("", _CONFIG.sub("", _JINJA_COMMENT.sub("", sql))).strip()


def _top_level(sql: str):
    """Yield (index, character) of the characters at parenthesis depth 0, outside strings and `{{ }}` / `{% %}`."""
    depth, i = 0, 0
    while i < len(sql):
        if sql.startswith(("{{", "{%"), i):
            i = sql.index("}}" if sql[i + 1] == "{" else "%}", i) + 2
            continue
        char = sql[i]
        if char == "'":
            i = sql.index("'", i + 1) + 1
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0:
            yield i, char
        i += 1


def _keyword_positions(sql: str, keyword: str) -> list[int]:
    top = dict(_top_level(sql))
    return [m.start() for m in re.finditer(rf"\b{keyword}\b", sql, re.I) if m.start() in top]


def _macro_body(name: str) -> str:
    for path in sorted((DBT / "macros").glob("*.sql")):
        match = re.search(rf"\{{%-?\s*macro\s+{name}\(.*?%\}}(.*?)\{{%-?\s*endmacro", path.read_text(), re.S)
        if match:
            return match.group(1)
    raise LookupError(f"macro {name} not found in dbt_project/macros/")


def select_columns(sql: str) -> list[str] | None:
    """The output columns of a model's final top-level select; None for `select *`."""
    sql = _strip(sql)
    call = _MACRO_CALL.match(sql)
    if call and not _keyword_positions(sql, "select"):
        sql = _strip(_macro_body(call.group(1)))
    select = _keyword_positions(sql, "select")[-1]
    end = next(p for p in _keyword_positions(sql, "from") if p > select)
    items, start = [], select + len("select")
    for index, char in _top_level(sql):
        if start <= index < end and char == ",":
            items.append(sql[start:index])
            start = index + 1
    items.append(sql[start:end])
    columns = []
    for item in (item.strip() for item in items):
        if item in ("*", "") or item.endswith(".*"):
            return None
        alias = re.search(r"\bas\s+([A-Za-z_][A-Za-z0-9_]*)\s*$", item, re.I)
        columns.append(alias.group(1) if alias else _IDENT.findall(item)[-1])
    return columns


def expected_columns(name: str, sql: Path) -> list[str] | None:
    folder = sql.relative_to(MODELS).parts[0]
    if folder in DRAWN_COLUMNS:
        return None
    if folder == "fhir":
        return list(RESOURCE_COLUMNS)
    return select_columns(sql.read_text())


# --- the checks ---------------------------------------------------------------------------------------------------


def test_the_select_list_reader():
    assert select_columns("{{ config(alias='x') }}\nselect a, t.b, f(c, d) as e, {{ m('x, y') }} as g\n"
                          "from (select z from y) as t order by a") == ["a", "b", "e", "g"]
    assert select_columns("with w as (select 1 as q from t)\nselect q, count(*) as n from w group by q") == ["q", "n"]
    assert select_columns("select * from t") is None
    assert select_columns(
        (MODELS / "ehrsql2024/mimic_iv/ehrsql2024__mimic_iv__cost.sql").read_text()
    ) == ["row_id", "subject_id", "hadm_id", "event_type", "event_id", "chargetime", "cost"]


def test_agent_facing_models_are_found():
    models = agent_facing_models()
    assert len([m for m in models if m.startswith("ehrsql2024__")]) == 17
    assert len([m for m in models if m.startswith("ehrsql_eicu__")]) == 11
    assert len([m for m in models if m.startswith("renamed__")]) == 28
    assert all(m in models for m in ("fhir__mimic_iv__patient", "dq__mimic_iv__lab_results"))


@pytest.mark.parametrize("name", sorted(agent_facing_models()))
def test_model_and_columns_are_described(name):
    sql = agent_facing_models()[name]
    model = yaml_models().get(name)
    assert model is not None, f"{name}: no YAML entry (add it to the _*.yml next to {sql.name})"
    assert str(model.get("description") or "").strip(), f"{name}: no model description"
    columns = expected_columns(name, sql)
    if columns is None:
        return
    described = {c["name"]: str(c.get("description") or "").strip() for c in model.get("columns") or []}
    missing = [c for c in columns if not described.get(c)]
    assert not missing, f"{name}: columns without a description: {', '.join(missing)}"
    stale = sorted(set(described) - set(columns))
    assert not stale, f"{name}: YAML describes columns the model does not return: {', '.join(stale)}"
