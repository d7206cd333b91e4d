"""FHIR-AgentBench's ground truth by its published rules (docs/benchmarks.md#fhir-agentbench-ground-truth-rules): which
EHRSQL-2024 questions it keeps, how it maps their "current time" to the patient's raw calendar year, and which FHIR
resource ids its gold lists. Learnt from glee4810/FHIR-AgentBench (`create_question_answer_dataset.py`,
`create_question_fhir_dataset.py`, `utils/fhir_utils.py`, `utils/sql_to_fhir_utils.py`, `config.py`).

    EHRSQL-2024 split (annotated.json + answer.json)
      → keep: no cost / insurance / diagnoses_icd.charttime, main table not a d_icd dictionary, template not removed,
        one demo patient (`dropped_reason`)
      → the patient's anchor_year for 2100 and for current_time; "since" filters capped at the year's end (`fix_query`)
      → the fixed SQL on the raw tables (`fhir_agentbench__mimic_iv`, SQLite): the answer; a failing query drops it
      → the outer SELECT made `SELECT <main table>.*` (`rows_query`): every row it returns is gold
      → each row's resource ids (`row_resource_ids`), kept if they exist in the mimic_iv_on_fhir view: outside
        microbiology one missing id empties the question's ids, in microbiology only the missing ids go

Where the result may depart from the published file is listed in `ehrbench.fhir.agentbench_agreement.ASSUMED`."""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import sqlglot
from sqlglot import exp

from ehrbench.errors import ConfigError
from ehrbench.fhir.ids import MIMIC_IV_NAMESPACE, medication_key
from ehrbench.warehouse import open_sqlite_read_only

# The 13 templates FHIR-AgentBench removes (its config.py REMOVE_TEMPLATES: intake volumes, whose totalamount and
# starttime it does not map to FHIR, and SQL it found too complex).
REMOVED_TEMPLATES = frozenset({
    "What was the total volume of {input_name} intake that patient {patient_id} received [time_filter_global1]?",
    "What was the total volume of intake that patient {patient_id} received [time_filter_global1]?",
    "List the [unit_average] [agg_function] volume of {input_name} intake that patient {patient_id} received "
    "[time_filter_global1].",
    "What is the difference between the total volume of intake and output of patient {patient_id} "
    "[time_filter_global1]?",
    "When was the [time_filter_exact1] intake time of patient {patient_id} [time_filter_global1]?",
    "Has_verb patient {patient_id} had any {input_name} intake [time_filter_global1]?",
    "How many [unit_count] have passed since the [time_filter_exact1] time patient {patient_id} had a {input_name} "
    "intake on the current ICU visit?",
    "What was the name of the intake that patient {patient_id} [time_filter_exact1] had [time_filter_global1]?",
    "When was the [time_filter_exact1] time that patient {patient_id} had a {input_name} intake "
    "[time_filter_global1]?",
    "Count the number of times that patient {patient_id} had a {input_name} intake [time_filter_global1].",
    "What is the new prescription of patient {patient_id} [time_filter_global2] compared to the prescription "
    "[time_filter_global1]?",
    "What was the name of the drug that patient {patient_id} was prescribed [time_filter_within] after having "
    "received a {procedure_name} procedure [time_filter_global1]?",
    "What was the name of the drug that patient {patient_id} was prescribed [time_filter_within] after having been "
    "diagnosed with {diagnosis_name} [time_filter_global1]?",
})

# Main table -> the id namespaces (MIMIC-IV on FHIR's resource names) each returned row yields (its
# TABLE_TO_RESOURCE_MAP); a question whose main table is not here (a dictionary, a derived table) is not kept.
# "Specimen" is its name, not MIMIC-IV on FHIR's ("SpecimenMicro"): those ids never exist and are pruned.
MAIN_TABLE_NAMESPACES: dict[str, tuple[str, ...]] = {
    "admissions": ("Encounter",), "icustays": ("EncounterICU",), "diagnoses_icd": ("Condition",),
    "prescriptions": ("MedicationPrescriptions", "MedicationRequest"), "patients": ("Patient",),
    "procedures_icd": ("Procedure",), "chartevents": ("ObservationChartevents",),
    "inputevents": ("MedicationAdministrationICU",),
    "microbiologyevents": ("ObservationMicroTest", "ObservationMicroOrg", "ObservationMicroSusc", "Specimen"),
    "outputevents": ("ObservationOutputevents",), "transfers": ("Location",), "labevents": ("ObservationLabevents",),
}
# Namespace -> the resource type its ids are listed under in `true_fhir_ids` (its RESOURCE_TO_GCP_FHIR_MAP).
NAMESPACE_TYPES = {
    "Encounter": "Encounter", "EncounterICU": "Encounter", "Condition": "Condition",
    "MedicationPrescriptions": "Medication", "MedicationRequest": "MedicationRequest", "Patient": "Patient",
    "Procedure": "Procedure", "ObservationChartevents": "Observation",
    "MedicationAdministrationICU": "MedicationAdministration", "ObservationMicroTest": "Observation",
    "ObservationMicroOrg": "Observation", "ObservationMicroSusc": "Observation",
    "ObservationOutputevents": "Observation", "Location": "Location", "ObservationLabevents": "Observation",
    "Specimen": "Specimen",
}
_DRUG_TYPE_ORDER = {"MAIN": 3, "BASE": 2, "ADDITIVE": 1}
_YEAR = re.compile(r"(?<!\d)2100(?!\d)")

@dataclass(frozen=True)
class SplitQuestion:
    """One question of an EHRSQL-2024 split as FHIR-AgentBench reads it."""
    question_id: str
    split: str
    question: str
    query: str
    template: str
    val_dict: dict

    @property
    def subject_id(self) -> int | None:
        value = (self.val_dict.get("val_placeholder") or {}).get("patient_id")
        return int(value) if value is not None else None


@dataclass
class AgentBenchGold:
    """A question's FHIR-AgentBench gold (or why it is not in FHIR-AgentBench)."""
    question_id: str
    split: str
    dropped: str | None = None  # why the question is not kept; None when kept
    question: str | None = None  # the anchor-year text
    sql: str | None = None  # the fixed gold SQL
    patient_fhir_id: str | None = None
    answer: list[list] | None = None
    ids: dict[str, list[str]] = field(default_factory=dict)  # resource type -> sorted ids
    pruned: int = 0  # ids made from the rows but not in the view

    def to_dict(self) -> dict:
        flat = sorted((kind, i) for kind, values in self.ids.items() for i in values)
        return {"question_id": self.question_id, "split": self.split, "kept": self.dropped is None,
                "dropped": self.dropped, "question": self.question, "sql": self.sql,
                "patient_fhir_id": self.patient_fhir_id,
                "true_answer": None if self.answer is None else json.dumps(self.answer, default=str),
                "true_fhir_ids": json.dumps(self.ids, sort_keys=True) if self.dropped is None else None,
                "resource_ids": [i for _, i in flat], "resource_types": [t for t, _ in flat],
                "pruned_ids": self.pruned}


def read_split(folder: Path) -> list[SplitQuestion]:
    """The questions of one EHRSQL-2024 split folder (annotated.json, answer.json), the split named by the folder;
    questions without gold SQL (`"null"`) are left out, as FHIR-AgentBench does."""
    annotated, answers = folder / "annotated.json", folder / "answer.json"
    for path in (annotated, answers):
        if not path.is_file():
            raise ConfigError(f"--ehrsql2024-split: {path} not found; expected an EHRSQL-2024 split folder "
                              "(data/mimic_iv/<split>/ with annotated.json and answer.json)")
    try:
        items = json.loads(annotated.read_text())
        answered = json.loads(answers.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--ehrsql2024-split: {folder}: not JSON ({exc})") from None
    questions = []
    for index, item in enumerate(items if isinstance(items, list) else []):
        try:
            if item["id"] not in answered or item["query"] == "null":
                continue
            questions.append(SplitQuestion(str(item["id"]), folder.name, item["question"], item["query"],
                                           item["template"], item["val_dict"]))
        except (KeyError, TypeError):
            raise ConfigError(f"{annotated}: item {index}: expected id, question, query, template and val_dict"
                              ) from None
    if not questions and not isinstance(items, list):
        raise ConfigError(f"{annotated}: expected a list of questions")
    return questions


def main_table(sql: str) -> str:
    """The word after the first "FROM " (FHIR-AgentBench's main table; "(" for a derived table)."""
    parts = sql.split("FROM ", 1)
    return parts[1].split(" ")[0] if len(parts) == 2 else ""


def dropped_reason(question: SplitQuestion, anchor_years: Mapping[int, int]) -> str | None:
    """Why FHIR-AgentBench leaves the question out before running it (None: kept), in its order."""
    if "cost" in question.query:
        return "reads cost"
    if "insurance" in question.question.lower():
        return "asks about insurance"
    if "diagnoses_icd.charttime" in question.query:
        return "reads diagnoses_icd.charttime"
    table = main_table(question.query)
    if table in ("d_icd_diagnoses", "d_icd_procedures"):
        return f"main table {table}"
    if question.template in REMOVED_TEMPLATES:
        return "removed template"
    if question.subject_id is None:
        return "no patient"
    if question.subject_id not in anchor_years:
        return "patient not in the data"
    if table not in MAIN_TABLE_NAMESPACES:
        return "main table is a derived table" if table.startswith("(") else f"main table {table} not mapped"
    return None


def fix_query(question: SplitQuestion, anchor_year: int) -> tuple[str, str]:
    """(question, SQL) in the patient's raw calendar: 2100 -> anchor_year, current_time -> '<anchor_year>-12-31
    00:00:00' (in the SQL; the question's assumption says 23:59:00), and a "since" filter also capped at
    '<anchor_year>-12-31 23:59:00'."""
    text = _YEAR.sub(str(anchor_year), question.question)
    now = f"'{anchor_year}-12-31 00:00:00'"
    sql = _YEAR.sub(str(anchor_year), question.query).replace("current_time", now)
    global_filter = (question.val_dict.get("time_placeholder") or {}).get("time_filter_global1") or {}
    if "since" in str(global_filter.get("type", "")):
        filters, columns = global_filter.get("sql"), global_filter.get("col") or []
        if isinstance(filters, list):
            pairs = list(zip(filters, columns, strict=False))
        else:
            pairs = [(filters, columns[0] if columns else None)]
        for part, column in pairs:
            if not part or not column:
                continue
            part = _YEAR.sub(str(anchor_year), part).replace("current_time", now)
            sql = sql.replace(part, f"{part} AND strftime('%Y-%m-%d',{column}) <= '{anchor_year}-12-31 23:59:00'")
    return text, sql


def rows_query(sql: str) -> str:
    """The query returning every row FHIR-AgentBench counts as gold: the outer SELECT list made `<main table>.*`
    (WHERE, ORDER BY and LIMIT kept); a SELECT of scalar subqueries (`SELECT (SELECT …) - (SELECT …)`) becomes the
    UNION ALL of each subquery's rows."""
    parts = _scalar_subqueries(sql)
    if parts:
        return "\nUNION ALL\n".join(f"SELECT * FROM {_star(part)} AS sub{i + 1}" for i, part in enumerate(parts))
    return _star(sql)


def _star(sql: str) -> str:
    select, start = sql.find("SELECT"), sql.find("FROM")
    table = sql[start:].split(" ")[1]
    columns = "*" if table.startswith("(") else f"{table}.*"
    return f"{sql[:select]}SELECT {columns} {sql[start:]}"


def _scalar_subqueries(sql: str) -> list[str]:
    """The subqueries that are direct operands of an outer SELECT expression, as SQLite text in parentheses."""
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except sqlglot.errors.ParseError:
        return []
    if not isinstance(tree, exp.Select):
        return []
    return [child.sql(dialect="sqlite") for expression in tree.expressions
            for child in expression.find_all(exp.Subquery) if child.parent is expression]


def published_id(namespace_name: str, key: str) -> str:
    """uuid5(uuid5(uuid5(OID, "MIMIC-IV"), namespace), key), for any namespace name FHIR-AgentBench uses."""
    return str(uuid.uuid5(uuid.uuid5(MIMIC_IV_NAMESPACE, namespace_name), key))


def row_resource_ids(table: str, rows: Sequence[Mapping]) -> list[tuple[str, str]]:
    """(resource type, id) of every resource FHIR-AgentBench makes from the returned rows of `table`, in order,
    without repeats. Prescriptions also yield each row's Medication and the order's mix Medication (the rows of one
    pharmacy_id among those returned, MAIN before BASE before ADDITIVE, then by drug)."""
    found: dict[str, str] = {}
    for namespace_name in MAIN_TABLE_NAMESPACES[table]:
        kind = NAMESPACE_TYPES[namespace_name]
        for row in rows:
            found.setdefault(published_id(namespace_name, _row_key(table, namespace_name, row)), kind)
    if table == "prescriptions":
        orders: dict[object, list[Mapping]] = {}
        for row in rows:
            orders.setdefault(row["pharmacy_id"], []).append(row)
        for order in orders.values():
            ranked = sorted(order, key=lambda r: (-_DRUG_TYPE_ORDER.get((r["raw_drug_type"] or "").upper(), 0),
                                                  r["raw_drug"]))
            mix = "_".join(_medication(row) for row in ranked)
            found.setdefault(published_id("MedicationPrescriptions", mix), "Medication")
    return [(kind, resource) for resource, kind in found.items()]


def _medication(row: Mapping) -> str:
    return medication_key(row["raw_drug"], row["raw_formulary_drug_cd"], row["ndc"])


def _row_key(table: str, namespace_name: str, row: Mapping) -> str:
    """The key FHIR-AgentBench's create_unique_table_id makes of a raw row for one namespace."""
    match namespace_name:
        case "Encounter":
            return str(row["hadm_id"])
        case "EncounterICU":
            return str(row["stay_id"])
        case "Condition" | "Procedure":
            return f"{row['hadm_id']}-{row['seq_num']}-{row['raw_icd_code'].upper()}"
        case "MedicationPrescriptions":
            return _medication(row)
        case "MedicationRequest":
            return str(row["pharmacy_id"])
        case "Patient":
            return str(row["subject_id"])
        case "ObservationLabevents":
            return str(row["labevent_id"])
        case "ObservationChartevents":
            return f"{row['stay_id']}-{row['charttime']}-{row['itemid']}-{row['raw_value']}"
        case "ObservationOutputevents":
            return f"{row['stay_id']}-{row['charttime']}-{row['itemid']}"
        case "MedicationAdministrationICU":
            return f"{row['stay_id']}-{row['orderid']}-{row['itemid']}"
        case "ObservationMicroTest":
            return f"{row['micro_specimen_id']}-{row['test_itemid']}"
        case "ObservationMicroOrg":
            organism = int(row["org_itemid"]) if row["org_itemid"] is not None else "NULL"
            return f"{row['test_itemid']}-{row['micro_specimen_id']}-{organism}"
        case "ObservationMicroSusc":
            return str(row["microevent_id"])
        case "Specimen":
            return str(row["micro_specimen_id"])
        case "Location":
            return str(row["raw_careunit"])
    raise ValueError(f"no FHIR-AgentBench key for namespace {namespace_name!r} of table {table!r}")


def ground_split(questions: Iterable[SplitQuestion], database: Path,
                 present: callable) -> list[AgentBenchGold]:
    """FHIR-AgentBench's gold for each question: `database` is the SQLite copy of `fhir_agentbench__mimic_iv`,
    `present(ids)` returns the subset of ids that exist in the mimic_iv_on_fhir view."""
    sqlite = open_sqlite_read_only(database)
    sqlite.row_factory = sqlite3.Row
    try:
        anchor_years = dict(sqlite.execute("select subject_id, anchor_year from patients").fetchall())
        golds, made = [], {}
        for question in questions:
            gold = AgentBenchGold(question.question_id, question.split, dropped_reason(question, anchor_years))
            golds.append(gold)
            if gold.dropped:
                continue
            gold.question, gold.sql = fix_query(question, anchor_years[question.subject_id])
            gold.patient_fhir_id = published_id("Patient", str(question.subject_id))
            try:
                gold.answer = [list(row) for row in sqlite.execute(gold.sql).fetchall()]
            except sqlite3.Error as exc:
                gold.dropped = f"gold SQL fails on the raw tables: {exc}"
                continue
            table = main_table(gold.sql)
            try:
                rows = sqlite.execute(rows_query(gold.sql)).fetchall()
            except sqlite3.Error:
                rows = []  # as published: the question stays, with no ids
            made[question.question_id] = table, row_resource_ids(table, rows)
    finally:
        sqlite.close()
    existing = present({resource for _, pairs in made.values() for _, resource in pairs})
    for gold in golds:
        if gold.question_id not in made:
            continue
        table, pairs = made[gold.question_id]
        kept = [(kind, resource) for kind, resource in pairs if resource in existing]
        gold.pruned = len(pairs) - len(kept)
        if gold.pruned and table != "microbiologyevents":
            kept = []  # one id not in the view empties the question's gold
        for kind, resource in kept:
            gold.ids.setdefault(kind, []).append(resource)
        gold.ids = {kind: sorted(set(values)) for kind, values in sorted(gold.ids.items())}
    return golds


SOURCE_SCHEMA = "fhir_agentbench__mimic_iv"  # the dbt views of the raw tables the gold SQL runs on


def ground_split_on_warehouse(split: Path, warehouse: Path, resources: Path, work_dir: Path) -> list[AgentBenchGold]:
    """FHIR-AgentBench's gold of one EHRSQL-2024 split folder: the raw tables of `warehouse` are copied to SQLite
    under `work_dir` (FHIR-AgentBench runs its SQL in SQLite), ids are checked in the view's `resources`."""
    from ehrbench.export import export_schema
    from ehrbench.fhir.ground_truth import present_resources

    questions = read_split(split)
    database = work_dir / "fhir_agentbench.sqlite"
    try:
        export_schema(warehouse, SOURCE_SCHEMA, work_dir / "fhir_agentbench.duckdb", database)
    except Exception as exc:
        if "has no tables" in str(exc):
            raise ConfigError(f"{warehouse}: no schema {SOURCE_SCHEMA} (FHIR-AgentBench's raw tables, built with the "
                              "mimic_iv_on_fhir view since this version): rebuild with the view") from None
        raise
    return ground_split(questions, database, lambda ids: present_resources(resources, set(ids)))


def write_golds(golds: Sequence[AgentBenchGold], path: Path) -> None:
    """One row per question of the split (kept or not, with the reason), written whole or not at all."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("question_id", pa.string()), ("split", pa.string()), ("kept", pa.bool_()),
                        ("dropped", pa.string()), ("question", pa.string()), ("sql", pa.string()),
                        ("patient_fhir_id", pa.string()), ("true_answer", pa.string()),
                        ("true_fhir_ids", pa.string()), ("resource_ids", pa.list_(pa.string())),
                        ("resource_types", pa.list_(pa.string())), ("pruned_ids", pa.int64())])
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    try:
        pq.write_table(pa.Table.from_pylist([g.to_dict() for g in golds], schema=schema), partial)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
