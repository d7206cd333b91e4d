"""Dual grounding check: answer a question from the FHIR resources of its ground-truth id set alone, and compare
with the answer of its gold SQL. Agreement shows that the id set is sufficient and the FHIR view faithful; each
disagreement points at a mapping gap (e.g. several SQL rows that are one FHIR resource) or a FHIR-view bug.

The evaluator is small and per answer shape, read from the gold SQL's outermost SELECT list (sqlglot):
`COUNT(*)` -> number of resources; `COUNT(*) > 0` -> whether there is one; `MAX|MIN|AVG|SUM(table.column)` and a
plain `table.column` (also a dictionary's label or title, e.g. the diagnoses' titles) -> that column's FHIR element
(COLUMN_ELEMENTS) over the resources. Other shapes (arithmetic between subqueries, time differences, ...) are not
checked and are counted as such.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import sqlglot
from sqlglot import exp

from ehrbench.ehrsql import format_answer, prepare_gold_sql
from ehrbench.fhir.ground_truth import Grounding
from ehrbench.fhir.resource_source import ResourceSource, resources_connection
from ehrbench.warehouse import open_sqlite_read_only

# (table, column) of the EHRSQL MIMIC-IV schema -> the element of its resource holding the same value, as paths of
# keys and list indexes (the first present one counts). A dictionary column (an item's label, a code's title) is
# the display of the code of the resources that the question's rows became.
_CODE_DISPLAY = ("code", "coding", 0, "display")
COLUMN_ELEMENTS: dict[tuple[str, str], tuple[tuple[str | int, ...], ...]] = {
    ("labevents", "valuenum"): (("valueQuantity", "value"),),
    ("labevents", "charttime"): (("effectiveDateTime",),),
    ("chartevents", "valuenum"): (("valueQuantity", "value"),),
    ("chartevents", "charttime"): (("effectiveDateTime",),),
    ("outputevents", "value"): (("valueQuantity", "value"),),
    ("outputevents", "charttime"): (("effectiveDateTime",),),
    ("inputevents", "totalamount"): (("dosage", "dose", "value"),),
    ("inputevents", "starttime"): (("effectivePeriod", "start"),),
    ("prescriptions", "starttime"): (("authoredOn",),),
    ("prescriptions", "route"): (("dosageInstruction", 0, "route", "coding", 0, "code"),),
    ("admissions", "admittime"): (("period", "start"),),
    ("admissions", "dischtime"): (("period", "end"),),
    ("icustays", "intime"): (("period", "start"),),
    ("icustays", "outtime"): (("period", "end"),),
    ("procedures_icd", "charttime"): (("performedDateTime",),),
    ("patients", "gender"): (("gender",),),
    ("d_icd_diagnoses", "long_title"): (_CODE_DISPLAY,),
    ("d_icd_procedures", "long_title"): (_CODE_DISPLAY,),
    ("d_labitems", "label"): (_CODE_DISPLAY,),
    ("d_items", "label"): (_CODE_DISPLAY, ("medicationCodeableConcept", "coding", 0, "display")),
}
# The resource types a table's rows became: a question that also reads other tables (a procedure within n days of a
# diagnosis) has their resources in its id set too, which the value of this column does not come from.
TABLE_RESOURCE_TYPES: dict[str, set[str]] = {
    "labevents": {"Observation"}, "chartevents": {"Observation"}, "outputevents": {"Observation"},
    "inputevents": {"MedicationAdministration"}, "prescriptions": {"MedicationRequest", "Medication"},
    "admissions": {"Encounter"}, "icustays": {"Encounter"}, "procedures_icd": {"Procedure"}, "patients": {"Patient"},
    "d_icd_diagnoses": {"Condition"}, "d_icd_procedures": {"Procedure"}, "d_labitems": {"Observation"},
    "d_items": {"Observation", "MedicationAdministration"},
}
AGGREGATES = {exp.Max: max, exp.Min: min, exp.Sum: sum, exp.Avg: lambda values: sum(values) / len(values)}
GENDERS = {"male": "m", "female": "f"}


@dataclass
class CheckResult:
    checked: int = 0
    agreed: int = 0
    not_checkable: int = 0  # answer shape without an evaluator
    disagreements: list[dict] = field(default_factory=list)  # question_id, shape, sql_answer, fhir_answer

    def to_dict(self) -> dict:
        return {"checked": self.checked, "agreed": self.agreed, "disagreed": len(self.disagreements),
                "not_checkable": self.not_checkable, "disagreements": self.disagreements}


@dataclass(frozen=True)
class AnswerShape:
    kind: str  # count | exists | aggregate | values
    table: str | None = None
    column: str | None = None
    aggregate: type | None = None

    def __str__(self) -> str:
        target = f"{self.table}.{self.column}" if self.table else "*"
        return f"{self.aggregate.__name__.upper()}({target})" if self.aggregate else f"{self.kind} {target}"


def answer_shape(sql: str) -> AnswerShape | None:
    """The shape of the answer of `sql` when the evaluator can compute it from resources, else None."""
    tree = sqlglot.parse_one(sql, read="sqlite")
    if not isinstance(tree, exp.Select) or len(tree.expressions) != 1 or tree.args.get("group"):
        return None  # one answer column, no groups (a daily maximum is one value per day)
    projection = tree.expressions[0].unalias()
    if isinstance(projection, exp.Count) and isinstance(projection.this, exp.Star):
        return AnswerShape("count")
    if (isinstance(projection, exp.GT) and isinstance(projection.this, exp.Count)
            and projection.expression.sql() == "0"):
        return AnswerShape("exists")
    aggregate = type(projection) if type(projection) in AGGREGATES else None
    column = projection.this if aggregate else projection
    if isinstance(column, exp.Column) and (column.table, column.name) in COLUMN_ELEMENTS:
        return AnswerShape("aggregate" if aggregate else "values", column.table, column.name, aggregate)
    return None


def fhir_answer(shape: AnswerShape, resources: list[dict]) -> str:
    """The answer computed from the resources, formatted as the EHRSQL-2024 comparison formats SQL answers."""
    if shape.kind == "count":
        return format_answer([[len(resources)]])
    if shape.kind == "exists":
        return format_answer([[int(bool(resources))]])
    paths = COLUMN_ELEMENTS[(shape.table, shape.column)]
    types = TABLE_RESOURCE_TYPES[shape.table]
    values = [_sql_value(v) for v in (_element(r, paths) for r in resources if r.get("resourceType") in types)
              if v is not None]
    if shape.kind == "aggregate":
        return format_answer([[AGGREGATES[shape.aggregate](values) if values else None]])
    return format_answer([[v] for v in {_casefold(v) for v in values}])


def check_groundings(groundings: Iterable[Grounding], questions: dict[str, str], database: Path,
                     resources: ResourceSource, current_time: str, *, limit: int | None = None,
                     seed: int = 0) -> CheckResult:
    """Check the mapped, single-patient groundings (a seeded sample of `limit` of them when given); `questions`
    maps question id to gold SQL, run on `database` (the profile's SQLite file)."""
    candidates = sorted((g for g in groundings if g.status == "mapped" and g.patient_scoped),
                        key=lambda g: g.question_id)
    if limit is not None and len(candidates) > limit:
        candidates = sorted(random.Random(seed).sample(candidates, limit), key=lambda g: g.question_id)
    result = CheckResult()
    sqlite = open_sqlite_read_only(database)
    with resources_connection(resources) as con:  # every resource needed, in one scan (not one each)
        texts = dict(con.execute("select id, resource::varchar from resources where id in (select unnest(?))",
                                 [sorted({i for g in candidates for i in g.resource_ids})]).fetchall())
    try:
        for grounding in candidates:
            sql = prepare_gold_sql(questions[grounding.question_id], current_time)
            shape = answer_shape(sql)
            if shape is None:
                result.not_checkable += 1
                continue
            from_fhir = fhir_answer(shape, [json.loads(texts[i]) for i in grounding.resource_ids if i in texts])
            rows = sqlite.execute(sql).fetchall()
            if shape.kind == "values":  # resources are distinct; SQL text is lower-cased, FHIR keeps MIMIC's case
                rows = {tuple(_casefold(cell) for cell in row) for row in rows}
            from_sql = format_answer(rows)
            result.checked += 1
            if from_fhir == from_sql:
                result.agreed += 1
            else:
                result.disagreements.append({"question_id": grounding.question_id, "shape": str(shape),
                                             "sql_answer": from_sql, "fhir_answer": from_fhir})
    finally:
        sqlite.close()
    return result


def _element(resource: dict, paths: tuple[tuple[str | int, ...], ...]):
    for path in paths:
        value = resource
        try:
            for step in path:
                value = value[step]
        except (KeyError, IndexError, TypeError):
            continue
        return value
    return None


def _sql_value(value):
    """A FHIR value as the SQL databases hold it: dateTimes as 'YYYY-MM-DD HH:MM:SS' (wall clock, offset dropped),
    genders as MIMIC-IV's letters, numbers as REAL."""
    if isinstance(value, str) and len(value) >= 19 and value[10:11] == "T":
        return value[:10] + " " + value[11:19]
    if isinstance(value, str) and value in GENDERS:
        return GENDERS[value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)  # JSON writes 140.0 as 140; the SQL columns compared are REAL
    return value


def _casefold(value):
    return value.lower() if isinstance(value, str) else value


def check_markdown(result: CheckResult, shown: int = 20) -> str:
    """The build report's section: totals, then the disagreements (first `shown`)."""
    lines = [f"**Dual grounding check**: {result.checked} single-patient questions answered from their FHIR "
             f"resources alone; {result.agreed} agree with the SQL answer, {len(result.disagreements)} disagree "
             f"({result.not_checkable} more have an answer shape without an evaluator)."]
    if result.disagreements:
        lines += ["", "| question | answer shape | SQL answer | FHIR answer |", "|---|---|---|---|"]
        lines += [f"| {d['question_id']} | {d['shape']} | {d['sql_answer'][:80]} | {d['fhir_answer'][:80]} |"
                  for d in result.disagreements[:shown]]
    return "\n".join(lines)
