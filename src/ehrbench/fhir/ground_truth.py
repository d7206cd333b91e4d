"""Resource-id ground truth of SQL questions (docs/benchmarks.md#fhir-agentbench-data-and-ground-truth): the FHIR
resources an agent must retrieve to answer a question over FHIR are the resources made from the rows its gold SQL reads.

    gold SQL --(evidence.evidence_queries, run on the profile's SQLite file)--> (table, row_id)
             --(hidden lineage: source_key = the raw MIMIC-IV key fields)--> resource ids (ids.key_from_fields)
             --> checked against the build's FHIR resources

A question whose evidence is empty gets an empty id set (status "empty"); one whose rows cannot be mapped is
"unmapped" with the reason (its ids found so far are kept). Reasons read "<category>: <detail>".
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq

from ehrbench.ehrsql import prepare_gold_sql
from ehrbench.fhir.evidence import UnsupportedQuery, evidence_queries, projected_columns
from ehrbench.fhir.ids import RESOURCE_TYPES, key_from_fields, resource_id
from ehrbench.fhir.resource_source import ResourceSource, resources_connection
from ehrbench.warehouse import open_duckdb, open_sqlite_read_only

# The resource (id namespace) each patient-data row of the EHRSQL MIMIC-IV schema becomes. Transfers live in the
# hospital Encounter's location list; microbiology rows depend on what the question reads (_micro_namespaces).
ROW_NAMESPACES: dict[str, tuple[str, ...]] = {
    "patients": ("Patient",),
    "admissions": ("Encounter",),
    "icustays": ("EncounterICU",),
    "transfers": ("Encounter",),
    "diagnoses_icd": ("Condition",),
    "procedures_icd": ("Procedure",),
    "labevents": ("ObservationLabevents",),
    "chartevents": ("ObservationChartevents",),
    "outputevents": ("ObservationOutputevents",),
    "inputevents": ("MedicationAdministrationICU",),
    "prescriptions": ("MedicationRequest",),
}
NOT_IN_FHIR = {"cost": "reads cost: EHRSQL's synthetic costs have no FHIR resource"}
# Key fields a row's resource needs that the lineage does not hold, read from the profile database's row.
ROW_FIELDS = {"transfers": ("hadm_id",)}

Status = Literal["mapped", "empty", "unmapped"]


@dataclass(frozen=True)
class Question:
    question_id: str
    sql: str | None  # None: unanswerable
    patient_scoped: bool = False


@dataclass
class Grounding:
    question_id: str
    status: Status
    resource_ids: list[str] = field(default_factory=list)  # sorted
    resource_types: list[str] = field(default_factory=list)  # aligned with resource_ids
    evidence_rows: int = 0
    reason: str | None = None
    patient_scoped: bool = False

    def to_dict(self) -> dict:
        return {"question_id": self.question_id, "patient_scoped": self.patient_scoped, "status": self.status,
                "reason": self.reason, "evidence_rows": self.evidence_rows, "resource_ids": self.resource_ids,
                "resource_types": self.resource_types}


def ground_questions(questions: Iterable[Question], database: Path, lineage: Path, resources: ResourceSource,
                     current_time: str | None = None) -> list[Grounding]:
    """Ground every answerable question: `database` is the profile's SQLite file the gold SQL runs on, `lineage`
    its hidden lineage parquet, `resources` the view's resources (the build's fhir/resources.duckdb, or its models
    in the warehouse)."""
    prepare = (lambda sql: prepare_gold_sql(sql, current_time)) if current_time else prepare_gold_sql
    sqlite = open_sqlite_read_only(database)
    try:
        evidence = {q.question_id: _evidence_rows(sqlite, q, prepare) for q in questions if q.sql}
        scoped = {q.question_id: q.patient_scoped for q in questions if q.sql}
        row_fields = _row_fields(sqlite, evidence)
    finally:
        sqlite.close()
    source_keys = _source_keys(lineage, {row for rows, _, _ in evidence.values() for row in rows})
    mapped: dict[str, tuple[dict[str, str], list[str]]] = {}  # question -> (id -> type, problems)
    for question_id, (rows, reason, micro_namespaces) in evidence.items():
        found: dict[str, str] = {}
        problems = [reason] if reason else []
        for table, row_id in rows:
            if table in NOT_IN_FHIR:
                problems.append(NOT_IN_FHIR[table])
                continue
            fields = {**json.loads(source_keys.get((table, row_id), "{}")), **row_fields.get((table, row_id), {})}
            if not fields:
                problems.append(f"row not in the lineage: {table} row {row_id}")
                continue
            for name in micro_namespaces if table == "microbiologyevents" else ROW_NAMESPACES[table]:
                if name == "ObservationMicroOrg" and fields.get("org_itemid") is None:
                    name = "ObservationMicroTest"  # no organism grew: the test is the evidence
                found[resource_id(name, key_from_fields(name, fields))] = RESOURCE_TYPES[name]
        mapped[question_id] = found, problems
    present = present_resources(resources, {i for found, _ in mapped.values() for i in found})

    groundings = []
    for question_id, (found, problems) in mapped.items():
        missing = sorted(set(found) - present)
        if missing:
            problems.append(f"resources not in the FHIR view: {len(missing)}, e.g. {found[missing[0]]}/{missing[0]}")
        ids = sorted(set(found) & present)
        grounding = Grounding(question_id, "unmapped", resource_ids=ids, resource_types=[found[i] for i in ids],
                              evidence_rows=len(evidence[question_id][0]), patient_scoped=scoped[question_id])
        if problems:
            grounding.reason = "; ".join(dict.fromkeys(problems))
        else:
            grounding.status = "mapped" if ids else "empty"
        groundings.append(grounding)
    return groundings


def _evidence_rows(sqlite: sqlite3.Connection, question: Question, prepare) -> tuple[list, str | None, tuple]:
    """The (table, row_id) rows the gold SQL reads, the reason they are incomplete (None), and the resource
    namespaces of its microbiology rows."""
    sql = prepare(question.sql)
    try:
        queries = evidence_queries(sql)
    except UnsupportedQuery as exc:
        return [], f"unsupported SQL: {exc}", ()
    rows: dict[tuple[str, int], None] = {}  # ordered set
    for query in queries:
        try:
            result = sqlite.execute(query.sql).fetchall()
        except sqlite3.Error as exc:
            return list(rows), f"evidence SQL failed: {exc}", ()
        for values in result:
            for table, row_id in zip(query.tables, values, strict=True):
                if row_id is not None:
                    rows[(table, int(row_id))] = None
    micro = _micro_namespaces(sql) if any(t == "microbiologyevents" for t, _ in rows) else ()
    return list(rows), None, micro


def _micro_namespaces(sql: str) -> tuple[str, ...]:
    """A microbiology row makes a specimen, a test, an organism (and susceptibilities); the evidence is the
    resource holding what the question reads (returns): organism name -> organism, specimen type -> specimen, else
    the test (also when it only counts or filters)."""
    columns = projected_columns(sql, "microbiologyevents")
    chosen = [name for column, name in (("org_name", "ObservationMicroOrg"), ("test_name", "ObservationMicroTest"),
                                        ("spec_type_desc", "SpecimenMicro")) if column in columns]
    return tuple(chosen) or ("ObservationMicroTest",)


def _row_fields(sqlite: sqlite3.Connection, evidence: dict) -> dict[tuple[str, int], dict]:
    fields: dict[tuple[str, int], dict] = {}
    for table, columns in ROW_FIELDS.items():
        row_ids = sorted({r for rows, _, _ in evidence.values() for t, r in rows if t == table})
        if not row_ids:
            continue
        wanted = ", ".join(columns)
        for values in sqlite.execute(f"select row_id, {wanted} from {table} where row_id in "
                                     f"(select value from json_each(?))", [json.dumps(row_ids)]):
            fields[(table, values[0])] = dict(zip(columns, values[1:], strict=True))
    return fields


def _source_keys(lineage: Path, rows: set[tuple[str, int]]) -> dict[tuple[str, int], str]:
    if not rows:
        return {}
    tables, row_ids = zip(*rows, strict=True)
    wanted = pa.table({"table_name": pa.array(tables, pa.string()), "row_id": pa.array(row_ids, pa.int64())})
    con = open_duckdb()
    try:
        con.register("wanted", wanted)
        return {(t, r): k for t, r, k in con.execute(
            "select l.table_name, l.row_id, l.source_key::varchar from read_parquet(?) as l "
            "semi join wanted using (table_name, row_id)", [str(lineage)]).fetchall()}
    finally:
        con.close()


def present_resources(resources: ResourceSource, ids: set[str]) -> set[str]:
    """The ids among `ids` that a view's resources hold."""
    if not ids:
        return set()
    with resources_connection(resources) as con:
        con.register("wanted", pa.table({"id": pa.array(sorted(ids), pa.string())}))
        return {i for (i,) in con.execute("select id from resources semi join wanted using (id)").fetchall()}


def summarize(groundings: list[Grounding]) -> dict:
    """Counts per status for all and for single-patient questions, and unmapped questions per reason category."""
    def counts(items: list[Grounding]) -> dict:
        return {"questions": len(items), **{status: sum(g.status == status for g in items)
                                            for status in ("mapped", "empty", "unmapped")}}
    reasons: dict[str, int] = {}
    for grounding in groundings:
        if grounding.status == "unmapped":
            for reason in (grounding.reason or "unknown").split("; "):
                category = reason.split(":")[0]
                reasons[category] = reasons.get(category, 0) + 1
    return {"all": counts(groundings), "patient_scoped": counts([g for g in groundings if g.patient_scoped]),
            "unmapped_reasons": dict(sorted(reasons.items(), key=lambda item: -item[1]))}


def write_groundings(groundings: list[Grounding], path: Path) -> None:
    """One row per question (hidden: the gold of FHIR retrieval)."""
    schema = pa.schema([("question_id", pa.string()), ("patient_scoped", pa.bool_()), ("status", pa.string()),
                        ("reason", pa.string()), ("evidence_rows", pa.int64()),
                        ("resource_ids", pa.list_(pa.string())), ("resource_types", pa.list_(pa.string()))])
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([g.to_dict() for g in groundings], schema=schema), path)


def ground_truth_markdown(summary: dict) -> str:
    """The build report's view of a summary: shares of questions grounded, and why the others are not."""
    def share(part: int, whole: int) -> str:
        return f"{part} ({part / whole:.1%})" if whole else "0"
    lines = ["| questions | total | non-empty id set | empty answer (empty set) | unmapped |", "|---|---|---|---|---|"]
    for label, key in (("single-patient", "patient_scoped"), ("all answerable", "all")):
        c = summary[key]
        lines.append(f"| {label} | {c['questions']} | {share(c['mapped'], c['questions'])} | "
                     f"{share(c['empty'], c['questions'])} | {share(c['unmapped'], c['questions'])} |")
    if summary["unmapped_reasons"]:
        lines += ["", "| why unmapped | questions |", "|---|---|"]
        lines += [f"| {reason} | {n} |" for reason, n in summary["unmapped_reasons"].items()]
    return "\n".join(lines)
