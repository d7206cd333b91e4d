"""Expectation suites (JSON files in expectations/) validated against warehouse tables.

A suite file names a warehouse schema and, per table, GX expectation configurations:

    {"name": "staging_mimic_iv", "schema": "staging_mimic_iv",
     "tables": {"stg_mimic_iv__patients": {"source_table": "patients",
                "expectations": [{"type": "expect_column_values_to_be_between",
                                  "kwargs": {"column": "anchor_age", "min_value": 18, "max_value": 91}}]}}}

Schema tests (not null, unique, accepted values, relationships) live in dbt's YAML next to the models; the staging
suites check what those cannot say well: value distributions and ranges, row-count ranges and relations between
columns (tests/unit/test_staging_suites.py fails on an expectation that repeats a dbt test). A suite may carry a
`meta` object (notes for readers); it is not sent to GX.

Row-count expectations are skipped for tables whose raw source was absent (an optional table),
and the skip is reported.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

from ehrbench.errors import ValidationError

_ROW_COUNT = "expect_table_row_count_to_be_between"


class ExpectationOutcome(BaseModel):
    table: str
    expectation: str
    column: str | None = None
    success: bool
    observed: str | None = None
    unexpected_count: int | None = None
    error: str | None = None


class SuiteResult(BaseModel):
    name: str
    success: bool
    evaluated: int
    failed: list[ExpectationOutcome]
    skipped: list[str]
    outcomes: list[ExpectationOutcome]


def load_suite(path: Path) -> dict:
    try:
        suite = json.loads(path.read_text())
        suite["name"], suite["schema"], suite["tables"]  # noqa: B018 — required keys
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValidationError(f"{path}: not a valid suite file ({exc!r}); expected JSON with name, schema, "
                              "tables") from None
    return suite


def validate_suite(suite: dict, warehouse: Path, *, absent_sources: Iterable[str] = ()) -> SuiteResult:
    """Run every expectation of `suite` on the warehouse (read-only) and collect the outcomes."""
    import great_expectations as gx  # slow import; keep the library importable without paying it
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    from ehrbench.validation.duckdb_connection import ReadOnlyConnections

    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    absent = set(absent_sources)
    from great_expectations.data_context.types.base import ProgressBarsConfig

    connections = ReadOnlyConnections(warehouse, suite["schema"])
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)  # they flood flow logs
    datasource = context.data_sources.add_sql(
        name="warehouse", connection_string="duckdb:///:memory:",
        kwargs={"creator": connections})
    outcomes: list[ExpectationOutcome] = []
    skipped: list[str] = []
    try:
        for table, spec in suite["tables"].items():
            configs = []
            for item in spec["expectations"]:
                if item["type"] == _ROW_COUNT and spec.get("source_table") in absent:
                    skipped.append(f"{table}: {_ROW_COUNT} (source {spec['source_table']} absent)")
                    continue
                configs.append(item)
            if not configs:
                continue
            asset = datasource.add_table_asset(table, table_name=table)
            batch = asset.add_batch_definition_whole_table("all").get_batch()
            gx_suite = gx.ExpectationSuite(name=f"{suite['name']}.{table}")
            for item in configs:
                # add_expectation, not add_expectation_configuration: the latter upserts by domain (type + column,
                # or the table for unexpected_rows_expectation), so a second one would silently replace the first
                gx_suite.add_expectation(
                    ExpectationConfiguration(type=item["type"], kwargs=item.get("kwargs", {})).to_domain_obj())
            if len(gx_suite.expectations) != len(configs):
                raise ValidationError(f"{suite['name']}: {table} lists an expectation twice")
            result = batch.validate(gx_suite, result_format="SUMMARY")
            for r in result.results:
                kwargs = r.expectation_config.kwargs
                error = exception_message(r.exception_info)
                observed = r.result.get("observed_value")
                outcomes.append(ExpectationOutcome(
                    table=table, expectation=r.expectation_config.type,
                    column=outcome_label(kwargs) or r.expectation_config.description,
                    success=bool(r.success), observed=None if observed is None else str(observed),
                    unexpected_count=r.result.get("unexpected_count"), error=error))
    finally:
        datasource.get_execution_engine().engine.dispose()
        connections.close_all()  # release the read-only handles before dbt writes again
    failed = [o for o in outcomes if not o.success]
    return SuiteResult(name=suite["name"], success=not failed, evaluated=len(outcomes), failed=failed,
                       skipped=skipped, outcomes=outcomes)


def outcome_label(kwargs: dict) -> str | None:
    """What an outcome checked, for reports: its column(s) or description, and the rows it was restricted to, e.g.
    `valuenum where itemid == 220045` or `dischtime, admittime`."""
    label = (kwargs.get("column")
             or (", ".join(kwargs[k] for k in ("column_A", "column_B")) if kwargs.get("column_A") else None)
             or (", ".join(kwargs["column_list"]) if kwargs.get("column_list") else None)
             or kwargs.get("description"))
    condition = kwargs.get("row_condition")
    if label and condition:
        if isinstance(condition, dict) and condition.get("type") == "comparison":  # GX's serialized Condition
            condition = (f"{condition['column']['name']} {condition['operator']} "
                         f"{json.dumps(condition['parameter'], ensure_ascii=False)}")
        label += f" where {condition}"
    return label


def exception_message(info: dict | None) -> str | None:
    """GX reports errors flat or keyed by metric id; either way, the first message."""
    if not info:
        return None
    if info.get("raised_exception"):
        return info.get("exception_message")
    for value in info.values():
        if isinstance(value, dict) and value.get("raised_exception"):
            return value.get("exception_message")
    return None
