"""The generic test `column_checks` (a model's tests in one dbt node) finds what the tests of the same names find on
their own: a throwaway dbt project runs both on the same broken models, in a real dbt run on a real DuckDB file, and
every folded test must count the failing rows (values, for unique and accepted_values; combinations, for
unique_combination_of_columns) that the test on its own returns."""

from __future__ import annotations

import re
import shutil

import pytest
import yaml

from ehrbench.transform import PROJECT_DIR, run_dbt

pytestmark = pytest.mark.integration

# Each broken cell is chosen so that dbt's rule gives a known count:
#   unique(id): value 1 repeats -> 1; not_null(id): one NULL -> 1
#   relationships(parent_id -> parent.id): 3, 3 and 4 have no parent, NULL passes -> 3
#   accepted_values(kind in a, b): 'c' and 'd' (distinct), NULL passes -> 2
#   accepted_values(code in 9, 10, unquoted): 11 -> 1
#   timestamp_between(ts, 2000-01-01 .. 2100-12-31 23:59:59): 1999-12-31 and 2101-01-01; the bound itself passes -> 2
CHILD = """
select * from (values
    (1, 1, 'a', 9, timestamp '2050-01-01'),
    (1, 3, 'b', 10, timestamp '1999-12-31'),
    (2, null, 'c', 11, timestamp '2101-01-01'),
    (null, 3, null, null, null),
    (4, 4, 'd', 9, timestamp '2000-01-01 00:00:00')
) as t(id, parent_id, kind, code, ts)
"""
CHILD_TESTS = {
    "id": ["unique", "not_null"],
    "parent_id": [{"relationships": {"arguments": {"to": "ref('parent')", "field": "id"}}}],
    "kind": [{"accepted_values": {"arguments": {"values": ["a", "b"]}}}],
    "code": [{"accepted_values": {"arguments": {"values": [9, 10], "quote": False}}}],
    "ts": [{"timestamp_between": {"arguments": {"min_value": "2000-01-01 00:00:00",
                                                "max_value": "2100-12-31 23:59:59"}}}],
}
# Table tests: child has 5 rows, parent 2, `empty` none.
#   row_count_compared(child = parent): 5 != 2 -> 1; unique_combination_of_columns(code): 9 repeats, NULL once -> 1
#   not_empty(child) passes; not_empty(empty) -> 1; row_count_compared(parent <= child) passes
CHILD_MODEL_TESTS = [
    "not_empty",
    {"row_count_compared": {"arguments": {"compare_model": "ref('parent')", "comparison": "="}}},
    {"unique_combination_of_columns": {"arguments": {"combination_of_columns": ["code"]}}},
]
PARENT_MODEL_TESTS = [{"row_count_compared": {"arguments": {"compare_model": "ref('child')", "comparison": "<="}}}]
EXPECTED = {("row_count_compared", None): 1, ("unique_combination_of_columns", None): 1,
            ("unique", "id"): 1, ("not_null", "id"): 1, ("relationships", "parent_id"): 3,
            ("accepted_values", "kind"): 2, ("accepted_values", "code"): 1, ("timestamp_between", "ts"): 2}


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """One dbt build of the throwaway project (every test only warns, so that all run); its node results by name."""
    root = tmp_path_factory.mktemp("column_checks")
    project = root / "project"
    for sub in ("models", "macros", "tests/generic"):
        (project / sub).mkdir(parents=True)
    for generic in ("column_checks", "timestamp_between", "not_empty", "row_count_compared",
                    "unique_combination_of_columns"):
        shutil.copy(PROJECT_DIR / "tests" / "generic" / f"{generic}.sql", project / "tests" / "generic")
    shutil.copy(PROJECT_DIR / "macros" / "column_checks.sql", project / "macros")
    (project / "dbt_project.yml").write_text(yaml.safe_dump({
        "name": "checks", "version": "1.0", "profile": "ehrbench", "config-version": 2,
        "data_tests": {"+severity": "warn"}}))
    shutil.copy(PROJECT_DIR / "profiles.yml", project)
    (project / "models" / "parent.sql").write_text("select * from (values (1), (2)) as t(id)")
    (project / "models" / "child.sql").write_text(CHILD)
    (project / "models" / "empty.sql").write_text("select 1 as n where false")
    (project / "models" / "schema.yml").write_text(yaml.safe_dump({"version": 2, "models": [
        {"name": "child", "data_tests": [
            {"column_checks": {"name": "column_checks_child",
                               "arguments": {"model_tests": CHILD_MODEL_TESTS, "columns": CHILD_TESTS}}},
            *CHILD_MODEL_TESTS],
         "columns": [{"name": column, "data_tests": tests} for column, tests in CHILD_TESTS.items()]},
        {"name": "parent", "data_tests": [{"column_checks": {
            "name": "column_checks_parent",
            "arguments": {"model_tests": PARENT_MODEL_TESTS, "columns": {"id": ["unique", "not_null"]}}}}]},
        {"name": "empty", "data_tests": [
            {"column_checks": {"name": "column_checks_empty", "arguments": {"model_tests": ["not_empty"]}}},
            "not_empty"]},
    ]}, sort_keys=False))
    run = run_dbt(["build"], warehouse=root / "warehouse.duckdb", work_dir=root / "dbt", project_dir=project)
    return {node.unique_id.split(".")[2]: node for node in run.nodes if node.resource_type == "test"}


TABLE_TESTS = ("not_empty", "row_count_compared", "unique_combination_of_columns")
COLUMN_TESTS = ("not_null", "unique", "relationships", "accepted_values", "timestamp_between")


def found(message: str) -> dict:
    """(test, column or None) -> failing rows, from the message of a failed `column_checks` node."""
    parts = (re.fullmatch(r"(\w+)(?: on (\w+))?: (\d+)", part).groups() for part in message.split(", "))
    return {(test, column): int(n) for test, column, n in parts}


def test_each_folded_test_counts_what_the_test_on_its_own_returns(checked):
    folded = checked["column_checks_child"]
    assert folded.status == "warn"
    assert found(folded.message) == EXPECTED

    # each test on its own, run beside it: "Got N results" (node names read <test>_<model>_<arguments>)
    own = {}
    for name, node in checked.items():
        test = next((t for t in (*TABLE_TESTS, *COLUMN_TESTS) if name.startswith(f"{t}_child")), None)
        if test is None:
            continue
        column = None if test in TABLE_TESTS else next(c for c in CHILD_TESTS if name.startswith(f"{test}_child_{c}"))
        own[(test, column)] = int(re.search(r"Got (\d+) result", node.message).group(1)) if node.message else 0
    assert {key: n for key, n in own.items() if n} == EXPECTED
    assert own[("not_empty", None)] == 0  # and passed on its own too


def test_an_empty_model_fails_its_folded_not_empty_as_on_its_own(checked):
    assert checked["column_checks_empty"].status == "warn"
    assert found(checked["column_checks_empty"].message) == {("not_empty", None): 1}
    own = next(node for name, node in checked.items() if name.startswith("not_empty_empty"))
    assert own.status == "warn" and re.search(r"Got 1 result", own.message)


def test_a_model_whose_columns_hold_passes(checked):
    assert checked["column_checks_parent"].status == "pass"
    assert checked["column_checks_parent"].message is None
