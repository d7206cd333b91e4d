"""The staging GX suites and dbt's staging YAML tests do not check the same thing twice: schema tests (not null,
unique, accepted values, relationships, non-empty, compound keys) live in dbt; the suites check distributions,
ranges and relations between columns. Parses both files; no warehouse, no GX."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
STAGING_YAML = sorted((REPO / "dbt_project" / "models" / "staging").rglob("*.yml"))
SUITES = ("staging_mimic_iv", "staging_eicu")

# A GX expectation of one of these kinds is a schema test: it belongs in dbt.
SCHEMA_KINDS = {
    "expect_column_values_to_not_be_null": "not_null",
    "expect_column_values_to_be_unique": "unique",
    "expect_column_values_to_be_in_set": "accepted_values",
    "expect_column_distinct_values_to_be_in_set": "accepted_values",
    "expect_compound_columns_to_be_unique": "unique_combination_of_columns",
    "expect_select_column_values_to_be_unique_within_record": "unique_combination_of_columns",
}


def dbt_tests(paths=STAGING_YAML) -> set[tuple]:
    """(model, column or None, test name, frozen arguments) of every test that fails the build (severity warn only
    warns, so a GX expectation that fails on the same thing does not repeat it)."""
    tests: set[tuple] = set()

    def add(model: str, column: str | None, test) -> None:
        name, body = (test, {}) if isinstance(test, str) else next(iter(test.items()))
        body = body or {}
        if (body.get("config") or {}).get("severity", "error") == "warn":
            return
        args = {**(body.get("arguments") or {}), **{k: v for k, v in body.items() if k not in ("arguments", "config")}}
        tests.add((model, column, name.split(".")[-1], json.dumps(args, sort_keys=True)))

    for path in paths:
        for model in (yaml.safe_load(path.read_text()) or {}).get("models", []):
            for test in model.get("data_tests") or model.get("tests") or []:
                if isinstance(test, dict) and "column_checks" in test:  # a model's tests, folded in one node
                    arguments = test["column_checks"]["arguments"]
                    for model_test in arguments.get("model_tests", []):
                        add(model["name"], None, model_test)
                    for column, column_tests in arguments.get("columns", {}).items():
                        for column_test in column_tests:
                            add(model["name"], column, column_test)
                else:
                    add(model["name"], None, test)
            for column in model.get("columns") or []:
                for test in column.get("data_tests") or column.get("tests") or []:
                    add(model["name"], column["name"], test)
    return tests


def repeated_dbt_test(table: str, expectation: dict, tests: set[tuple]) -> str | None:
    """The dbt test `expectation` repeats on `table`, if any."""
    kind, kwargs = expectation["type"], expectation.get("kwargs", {})
    if kwargs.get("row_condition"):
        return None  # a check on some rows only is not a column's schema test
    named = {(model, column, name): args for model, column, name, args in tests}
    column = kwargs.get("column")
    if kind in ("expect_column_values_to_not_be_null", "expect_column_values_to_be_unique",
                "expect_column_values_to_be_in_set", "expect_column_distinct_values_to_be_in_set"):
        name = SCHEMA_KINDS[kind]
        return f"{name} on {table}.{column}" if (table, column, name) in named else None
    if kind in ("expect_compound_columns_to_be_unique", "expect_select_column_values_to_be_unique_within_record"):
        wanted = set(kwargs.get("column_list", []))
        for (model, _, name), args in named.items():
            if (model, name) == (table, "unique_combination_of_columns") and \
                    set(json.loads(args)["combination_of_columns"]) == wanted:
                return f"unique_combination_of_columns on {table}"
        return None
    if kind == "expect_table_row_count_to_be_between":
        only_not_empty = kwargs.get("max_value") is None and (kwargs.get("min_value") or 0) <= 1
        return f"not_empty on {table}" if only_not_empty and (table, None, "not_empty") in named else None
    if kind == "expect_column_values_to_be_between" and (table, column, "timestamp_between") in named:
        return f"timestamp_between on {table}.{column}"
    return None


def suite_expectations(name: str):
    suite = json.loads((REPO / "expectations" / f"{name}.json").read_text())
    for table, spec in suite["tables"].items():
        for expectation in spec["expectations"]:
            yield table, expectation


@pytest.fixture(scope="module")
def tests() -> set[tuple]:
    return dbt_tests()


def test_the_parser_sees_dbts_staging_tests(tests):
    names = {name for _, _, name, _ in tests}
    assert {"not_null", "unique", "accepted_values", "relationships", "not_empty",
            "unique_combination_of_columns"} <= names
    assert len(tests) > 150
    # severity warn is left out: the optional eICU vitalPeriodic may be empty
    assert ("stg_eicu__vitalperiodic", None, "not_empty", "{}") not in tests
    assert ("stg_mimic_iv__patients", None, "not_empty", "{}") in tests


def test_the_check_flags_a_repeated_dbt_test(tests):
    def flagged(table, type_, **kwargs):
        return repeated_dbt_test(table, {"type": type_, "kwargs": kwargs}, tests)

    assert flagged("stg_mimic_iv__patients", "expect_column_values_to_not_be_null", column="subject_id")
    assert flagged("stg_mimic_iv__admissions", "expect_column_values_to_be_unique", column="hadm_id")
    assert flagged("stg_mimic_iv__transfers", "expect_column_values_to_be_in_set", column="eventtype",
                   value_set=["ED"])
    assert flagged("stg_mimic_iv__prescriptions", "expect_compound_columns_to_be_unique",
                   column_list=["drug", "pharmacy_id", "drug_type"])
    assert flagged("stg_eicu__lab", "expect_table_row_count_to_be_between", min_value=1)
    assert not flagged("stg_eicu__lab", "expect_table_row_count_to_be_between", min_value=20_000, max_value=10**8)
    assert not flagged("stg_eicu__vitalperiodic", "expect_table_row_count_to_be_between", min_value=1)
    assert not flagged("stg_mimic_iv__patients", "expect_column_values_to_be_between", column="anchor_age",
                       min_value=18, max_value=91)


@pytest.mark.parametrize("name", SUITES)
def test_no_staging_expectation_repeats_a_dbt_test(name, tests):
    repeated = [f"{table}: {e['type']} {e.get('kwargs', {}).get('column', '')} repeats dbt's {by}"
                for table, e in suite_expectations(name) if (by := repeated_dbt_test(table, e, tests))]
    assert not repeated, "drop these from the GX suite (dbt already tests them):\n" + "\n".join(repeated)


@pytest.mark.parametrize("name", SUITES)
def test_schema_tests_live_in_dbt_not_in_the_staging_suites(name):
    """Not null, unique and value sets go into dbt's YAML even where dbt lacks them."""
    misplaced = [f"{table}: {e['type']} {e.get('kwargs', {}).get('column', '')}"
                 for table, e in suite_expectations(name) if e["type"] in SCHEMA_KINDS]
    assert not misplaced, "move these into dbt_project/models/staging/ as dbt tests:\n" + "\n".join(misplaced)


@pytest.mark.parametrize("name", SUITES)
def test_each_staging_suite_says_where_the_schema_tests_are(name):
    suite = json.loads((REPO / "expectations" / f"{name}.json").read_text())
    assert "live in dbt" in suite["meta"]["notes"]
    prefix = f"stg_{suite['schema'].removeprefix('staging_')}__"
    staged = {model["name"] for path in STAGING_YAML for model in (yaml.safe_load(path.read_text()) or {})
              .get("models", []) if model["name"].startswith(prefix)}
    assert set(suite["tables"]) == staged  # every staged table keeps an entry (at least its row-count range)


@pytest.mark.parametrize("name", SUITES)
def test_no_table_lists_an_expectation_twice(name):
    seen: set[str] = set()
    for table, expectation in suite_expectations(name):
        key = json.dumps([table, expectation], sort_keys=True)
        assert key not in seen, f"{table}: {expectation} twice"
        seen.add(key)
