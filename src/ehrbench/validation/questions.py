"""Great Expectations validation of generated questions (an in-memory pandas DataFrame of question records).

The suite is data (`expectations/questions.json`):

    {"name": "questions", "description": "...", "id_column": "question_id",
     "expectations": [{"type": "expect_column_values_to_be_unique", "kwargs": {"column": "question_id"},
                       "meta": {"name": "unique_id", "checks": "..."}}, ...],
     "coverage": {"group_by": "db",
                  "databases": {"mimic_iv": [{"type": "expect_column_unique_value_count_to_be_between",
                                              "kwargs": {"column": "template_id", "min_value": 120},
                                              "meta": {"name": "template_coverage"}}, ...]}}}

Row-level expectations run on every question with result format COMPLETE and the id column as the unexpected
index, so each failure names its question ids; a question failing any of them is quarantined with the names of
the expectations it failed. Coverage expectations run per database on the questions that pass every row-level
expectation. The suite may also check `is_unanswerable`, the negation of `is_answerable` added by the validation:
a column mean is the share of true values, so the unanswerable share needs a column that is true for those.
Row conditions are GX 1.x Condition objects written as dicts
(`{"type": "comparison", "column": {"name": "is_answerable"}, "operator": "==", "parameter": true}`).

`QuestionValidation.check(max_quarantine_share)` decides the build: it fails when the quarantined share exceeds
the threshold or an expectation could not be evaluated at all (a broken suite, not bad questions). Coverage
shortfalls are reported (manifest, artifact, Data Docs) but do not fail the build: a smaller dataset (say, the
eICU demo without vital signs) legitimately supports fewer templates.
"""

from __future__ import annotations

import copy
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from ehrbench.errors import ValidationError
from ehrbench.questions.generate import QUESTION_SCHEMA
from ehrbench.validation.data_docs import LocalizeReport, localize_data_docs
from ehrbench.validation.suites import exception_message

DATA_DOCS_SITE = "ehrbench_questions"
FAILED_COLUMN = "failed_expectations"
UNANSWERABLE_COLUMN = "is_unanswerable"  # derived: not is_answerable (null stays null)


class ExpectationResult(BaseModel):
    """One expectation's outcome; `database` is set for coverage expectations (None: row-level)."""

    name: str
    expectation: str
    column: str | None = None
    database: str | None = None
    success: bool
    unexpected_count: int | None = None
    observed: str | None = None
    error: str | None = None


class QuestionValidation(BaseModel):
    suite: str
    total: int  # question records validated
    outcomes: list[ExpectationResult]  # row-level, in suite order
    coverage: list[ExpectationResult]  # per database, on the questions that passed the row-level ones
    quarantined: dict[str, list[str]]  # question id -> names of the row-level expectations it failed
    quarantined_count: int  # records whose id is quarantined (a duplicated id counts once per record)
    quarantine_share: float
    data_docs_index: Path | None = None
    data_docs_offline: LocalizeReport | None = None  # the Data Docs' CDN files copied in (or why not)

    @property
    def failed(self) -> list[ExpectationResult]:
        """Row-level expectations that failed, most unexpected rows first."""
        return sorted((o for o in self.outcomes if not o.success), key=lambda o: -(o.unexpected_count or 0))

    @property
    def failed_coverage(self) -> list[ExpectationResult]:
        return [o for o in self.coverage if not o.success]

    def coverage_shortfalls(self) -> list[str]:
        return [f"{_where(o)}{o.name} (observed {o.observed})" for o in self.failed_coverage if not o.error]

    def summary(self) -> dict:
        """The manifest's record of the validation."""
        return {"suite": self.suite, "questions": self.total, "quarantined": self.quarantined_count,
                "quarantine_share": round(self.quarantine_share, 4),
                "failed": {o.name: o.unexpected_count for o in self.failed},
                "coverage": {f"{o.database}.{o.name}": {"success": o.success, "observed": o.observed}
                             for o in self.coverage},
                "data_docs": str(self.data_docs_index) if self.data_docs_index else None}

    def markdown(self) -> str:
        lines = [f"# Questions: {self.total} validated, {self.quarantined_count} quarantined "
                 f"({self.quarantine_share:.1%})", "", "| expectation | column | failed questions |", "|---|---|---|"]
        lines += [f"| {o.name} | {o.column or ''} | {o.unexpected_count} |" for o in self.failed] or ["| – | | 0 |"]
        lines += ["", "| database | coverage | met | observed |", "|---|---|---|---|"]
        lines += [f"| {o.database} | {o.name} | {'yes' if o.success else '**no**'} | {o.observed} |"
                  for o in self.coverage]
        return "\n".join(lines)

    def check(self, max_quarantine_share: float) -> None:
        """Raise ValidationError unless the build may go on (see the module doc)."""
        problems: list[str] = []
        if self.total == 0:
            problems.append("no questions to validate")
        errors = [o for o in [*self.outcomes, *self.coverage] if o.error]
        if errors:
            problems.append("could not evaluate " + "; ".join(
                f"{_where(o)}{o.name} ({o.expectation}): {o.error}" for o in errors[:5]))
        if self.quarantine_share > max_quarantine_share:
            top = ", ".join(f"{o.name} ({o.unexpected_count})" for o in self.failed[:5])
            problems.append(f"{self.quarantine_share:.1%} of {self.total} questions quarantined "
                            f"({self.quarantined_count}), above the threshold {max_quarantine_share:.1%}; "
                            f"top failing expectations: {top}")
        if problems:
            raise ValidationError(f"suite {self.suite}: " + " | ".join(problems))


def load_question_suite(path: Path) -> dict:
    try:
        suite = json.loads(path.read_text())
        suite["name"], suite["expectations"], suite["coverage"]["databases"]  # noqa: B018 — required keys
        for item in _all_items(suite):
            item["type"], item["meta"]["name"]  # noqa: B018
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValidationError(f"{path}: not a valid question suite file ({exc!r}); expected JSON with name, "
                              "expectations and coverage.databases, each expectation with type and meta.name"
                              ) from None
    names = [item["meta"]["name"] for item in suite["expectations"]]
    for items in [names, *([i["meta"]["name"] for i in v] for v in suite["coverage"]["databases"].values())]:
        duplicates = sorted({n for n in items if items.count(n) > 1})
        if duplicates:
            raise ValidationError(f"{path}: expectation names must be unique; repeated: {duplicates}")
    return suite


def validate_questions(records: Sequence[Mapping[str, Any]], suite_path: Path, *,
                       databases: Iterable[str] | None = None,
                       thresholds: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
                       data_docs_dir: Path | None = None) -> QuestionValidation:
    """Run the question suite on `records` (GeneratedQuestion.to_dict() rows).

    `databases`: the databases whose coverage is checked (default: those the records contain); a database listed
    here without passing questions fails its coverage. `thresholds`: per database, per coverage expectation name,
    kwargs replacing the suite's (`{"mimic_iv": {"template_coverage": {"min_value": 10}}}`). `data_docs_dir`:
    build GX Data Docs there (its index.html is returned as `data_docs_index`), made to work offline by
    ehrbench.validation.data_docs (its report: `data_docs_offline`).
    """
    import pandas as pd

    suite = load_question_suite(suite_path)
    coverage_suites = _coverage_suites(suite, thresholds)
    id_column = suite.get("id_column", "question_id")
    frame = pd.DataFrame.from_records([dict(r) for r in records],
                                      columns=None if records else QUESTION_SCHEMA.names)
    if id_column not in frame.columns or frame[id_column].isna().any():
        missing = [] if id_column not in frame.columns else frame.index[frame[id_column].isna()].tolist()[:10]
        raise ValidationError(f"question records need a non-null {id_column!r}; missing at positions {missing}")
    if "is_answerable" in frame.columns:
        frame[UNANSWERABLE_COLUMN] = frame["is_answerable"].map({True: False, False: True})
    group_by = suite["coverage"].get("group_by", "db")
    if databases is None:
        present = set(frame[group_by].dropna()) if group_by in frame.columns else set()
        wanted = sorted(present & set(coverage_suites))
    else:
        wanted = list(databases)
        unknown = [d for d in wanted if d not in coverage_suites]
        if unknown:
            raise ValidationError(f"{suite_path}: no coverage expectations for database(s) {unknown}; "
                                  f"the suite has {sorted(coverage_suites)}")

    runner = _GxRunner(data_docs_dir)
    row_result = runner.run(suite["name"], suite["expectations"], frame,
                            {"result_format": "COMPLETE", "unexpected_index_column_names": [id_column]})
    outcomes: list[ExpectationResult] = []
    quarantined: dict[str, list[str]] = {}
    for name, r in row_result:
        outcome = _outcome(name, r)
        outcomes.append(outcome)
        if outcome.success or outcome.error:
            continue  # an expectation that could not run quarantines nothing; check() fails the build instead
        for row in r.result.get("unexpected_index_list") or []:
            failed = quarantined.setdefault(str(row[id_column]), [])
            if name not in failed:
                failed.append(name)

    is_quarantined = frame[id_column].astype(str).isin(quarantined)
    passing = frame[~is_quarantined]
    coverage: list[ExpectationResult] = []
    for database in wanted:
        items = coverage_suites[database]
        subset = passing[passing[group_by] == database] if group_by in passing.columns else passing.iloc[:0]
        result = runner.run(f"{suite['name']}_coverage_{database}", items, subset.reset_index(drop=True),
                            {"result_format": "SUMMARY"})
        coverage.extend(_outcome(name, r, database=database) for name, r in result)

    total = len(frame)
    count = int(is_quarantined.sum())
    index = runner.build_docs()
    return QuestionValidation(
        suite=suite["name"], total=total, outcomes=outcomes, coverage=coverage,
        quarantined={k: quarantined[k] for k in sorted(quarantined)}, quarantined_count=count,
        quarantine_share=count / total if total else 0.0, data_docs_index=index,
        data_docs_offline=runner.docs_offline)


def write_quarantine(records: Sequence[Mapping[str, Any]], validation: QuestionValidation, path: Path,
                     schema: pa.Schema = QUESTION_SCHEMA) -> Path:
    """Write the quarantined questions (every column of `schema` + `failed_expectations`) to `path` atomically;
    always written, with the same schema when empty. Keys beyond the schema's columns become string columns."""
    schema = _quarantine_schema(records, schema)
    rows = []
    for record in records:
        failed = validation.quarantined.get(str(record.get("question_id")))
        if failed is None:
            continue
        row = {f.name: _cell(record.get(f.name), f.type) for f in schema if f.name != FAILED_COLUMN}
        row[FAILED_COLUMN] = list(failed)
        rows.append(row)
    table = pa.Table.from_pylist(rows, schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _quarantine_schema(records: Sequence[Mapping[str, Any]], base: pa.Schema) -> pa.Schema:
    known = set(base.names)
    extra = sorted({key for record in records for key in record if key not in known and key != FAILED_COLUMN})
    return pa.schema([*base, *(pa.field(k, pa.string()) for k in extra),
                      pa.field(FAILED_COLUMN, pa.list_(pa.string()))])


def _cell(value: Any, arrow_type: pa.DataType) -> Any:
    if value is None:
        return None
    try:
        import pandas as pd

        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass  # lists, dicts
    if pa.types.is_string(arrow_type):
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    if pa.types.is_boolean(arrow_type):
        return bool(value)
    if pa.types.is_integer(arrow_type):
        return int(value)
    if pa.types.is_floating(arrow_type):
        return float(value)
    return value


def _all_items(suite: dict) -> list[dict]:
    return [*suite["expectations"], *(i for v in suite["coverage"]["databases"].values() for i in v)]


def _coverage_suites(suite: dict, thresholds: Mapping[str, Mapping[str, Mapping[str, Any]]] | None
                     ) -> dict[str, list[dict]]:
    suites = copy.deepcopy(suite["coverage"]["databases"])
    for database, by_name in (thresholds or {}).items():
        items = {item["meta"]["name"]: item for item in suites.get(database, [])}
        for name, kwargs in by_name.items():
            if name not in items:
                raise ValidationError(f"threshold for unknown coverage expectation {database}.{name}; the suite "
                                      f"has {sorted(items) if items else 'no coverage for ' + database}")
            items[name].setdefault("kwargs", {}).update(kwargs)
    return suites


class _GxRunner:
    """One ephemeral GX context with a pandas datasource; optionally a local Data Docs site."""

    def __init__(self, data_docs_dir: Path | None):
        import great_expectations as gx  # slow import; keep the library importable without paying it
        from great_expectations.data_context.types.base import ProgressBarsConfig

        logging.getLogger("great_expectations").setLevel(logging.WARNING)
        self._gx = gx
        self._context = gx.get_context(mode="ephemeral")
        self._context.enable_analytics(False)
        self._context.variables.progress_bars = ProgressBarsConfig(globally=False)
        self._docs_dir = data_docs_dir.resolve() if data_docs_dir is not None else None
        if self._docs_dir is not None:
            self._docs_dir.mkdir(parents=True, exist_ok=True)
            self._context.add_data_docs_site(site_name=DATA_DOCS_SITE, site_config={
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                                  "base_directory": str(self._docs_dir)},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"}})
        self.docs_offline: LocalizeReport | None = None
        asset = self._context.data_sources.add_pandas("questions").add_dataframe_asset("questions")
        self._batch_definition = asset.add_batch_definition_whole_dataframe("all")

    def run(self, name: str, items: list[dict], frame, result_format: dict) -> list[tuple[str, Any]]:
        from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

        gx_suite = self._gx.ExpectationSuite(name=name)
        for item in items:
            # add_expectation, not add_expectation_configuration: the latter upserts by domain (type + column),
            # so a second expectation of one type on one column would silently replace the first
            gx_suite.add_expectation(ExpectationConfiguration(
                type=item["type"], kwargs=copy.deepcopy(item.get("kwargs", {})),
                meta=copy.deepcopy(item.get("meta", {}))).to_domain_obj())
        gx_suite = self._context.suites.add(gx_suite)
        definition = self._context.validation_definitions.add(
            self._gx.ValidationDefinition(name=name, data=self._batch_definition, suite=gx_suite))
        result = definition.run(batch_parameters={"dataframe": frame}, result_format=result_format)
        by_name = {r.expectation_config.meta["name"]: r for r in result.results}
        return [(item["meta"]["name"], by_name[item["meta"]["name"]]) for item in items]  # in suite order

    def build_docs(self) -> Path | None:
        if self._docs_dir is None:
            return None
        self._context.build_data_docs(site_names=[DATA_DOCS_SITE])
        index = self._docs_dir / "index.html"
        if not index.is_file():
            raise ValidationError(f"Great Expectations wrote no Data Docs index at {index}")
        # GX's pages load their CSS and JS from CDNs; without the npm copies the pages stay as they are (logged)
        self.docs_offline = localize_data_docs(self._docs_dir)
        return index


def _outcome(name: str, r, *, database: str | None = None) -> ExpectationResult:
    kwargs = r.expectation_config.kwargs
    column = kwargs.get("column") or (
        f"{kwargs['column_A']},{kwargs['column_B']}" if "column_A" in kwargs else None)
    error = exception_message(r.exception_info)
    result = r.result or {}
    observed = result.get("observed_value")
    if observed is None and "missing_count" in result:  # expect_column_distinct_values_to_contain_set
        observed = f"missing {sorted(map(str, result.get('partial_missing_list') or []))}"
    if observed is None and result.get("unexpected_count") is not None:
        observed = f"{result['unexpected_count']} unexpected of {result.get('element_count')}"
    text = None if observed is None else str(observed)
    return ExpectationResult(
        name=name, expectation=r.expectation_config.type, column=column, database=database,
        success=bool(r.success) and error is None, unexpected_count=result.get("unexpected_count"),
        observed=text if text is None or len(text) <= 300 else text[:297] + "...", error=error)


def _where(outcome: ExpectationResult) -> str:
    return f"{outcome.database}: " if outcome.database else ""
