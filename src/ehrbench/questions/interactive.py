"""Interactive tasks (suite `chatqa`, EHR-ChatQA style): a simulated user who knows a goal, an agent with tools over a
*renamed* database (profile `renamed`, DESIGN §5.2).

IncreQA (`incre_tasks`): an answerable, executed ehrsql question whose item (diagnosis, procedure, lab test, vital,
drug) has a lay term becomes a user instruction: the goal, then the question's constraints one by one, taken from the
template slots (patient, item, time expression, operators), the item named as people say it ("Hb", "AKI", "Lasix")
and never by its stored wording. Its gold SQL is the question's gold SQL renamed for `renamed/<db>`; the answer is
re-executed there and must equal the ehrsql answer (else the task is dropped and counted).

AdaptQA (`adapt_tasks`): tasks whose first request cannot be met as asked, with the user's fallback stated up front:
a brand name absent from the data → medications containing its generic name; a lab test absent from the data → a
clinically related test; a drug absent from the data → any drug of its class. Gold SQL is written over the
compatibility schema with the fallback (`... WHERE NOT EXISTS (asked)`), renamed, and executed on the renamed database.

`chatqa_export` writes both in EHR-ChatQA's task files. The curated tables live in `questions/data/*.yaml`;
`demo_coverage` reports how many of their entries match a database's stored values.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import yaml

from ehrbench.ehrsql.scoring import format_answer
from ehrbench.profiles import BenchmarkDatabase
from ehrbench.questions.dialects import UntranspilableSql, to_sqlite

# one implementation of timed execution and of answer cells, shared with the ehrsql suite
from ehrbench.questions.generate import (
    GeneratedQuestion,
    QueryTimeout,
    json_value,
    plain_cell,
    run_duckdb,
    run_sqlite,
)
from ehrbench.questions.instantiate import fill_texts, sql_literal
from ehrbench.questions.suites import write_once
from ehrbench.questions.templates import PROFILE_OF, Template, slot_order, time_family
from ehrbench.renaming import TABLE_NAME_COLUMNS, SchemaRename, rename_sql
from ehrbench.seeding import keyed_rng

DATA_DIR = Path(__file__).resolve().parent / "data"
SUITE = "chatqa"
RENAMED_PROFILE = "renamed"
# EHR-ChatQA's environment names for its renamed databases (our `renamed` profile rebuilds them, DESIGN §5.2)
CHATQA_DB_IDS = {"mimic_iv": "mimic_iv_star", "eicu": "eicu_star"}
TIMEOUT_S = 10.0

# ---------------------------------------------------------------------------------------------------------------
# curated tables


@dataclass(frozen=True)
class LayTerm:
    """Common names (`lay` first) for the stored `values` of one concept."""

    kind: str  # diagnoses | procedures | labs | vitals
    lay: str
    also: tuple[str, ...]
    values: tuple[str, ...]

    def names_for(self, stored: str) -> list[str]:
        """The names a user may say for `stored`: never its stored wording."""
        return [name for name in (self.lay, *self.also) if name.lower() != stored.lower()]


@dataclass(frozen=True)
class BrandGeneric:
    brand: str
    generic: str
    forms: tuple[str, ...] = ()  # other exact stored names of the same product (salts, release forms)
    drug_class: str | None = None

    @property
    def generic_names(self) -> tuple[str, ...]:
        return (self.generic, *self.forms)


@dataclass(frozen=True)
class DrugClass:
    name: str
    lay: str
    members: tuple[str, ...]


@dataclass(frozen=True)
class AlternativeLab:
    """`asked` / `alternative`: {"lay": ..., "<db>": stored name in that database}."""

    asked: Mapping[str, str]
    alternative: Mapping[str, str]


@dataclass(frozen=True)
class LayTerms:
    terms: Mapping[str, tuple[LayTerm, ...]]  # kind -> entries
    brands: tuple[BrandGeneric, ...]
    classes: Mapping[str, DrugClass]
    alternative_labs: tuple[AlternativeLab, ...]

    def term_for(self, kind: str, stored: str) -> LayTerm | None:
        return next((t for t in self.terms.get(kind, ()) if stored in t.values), None)

    def brand_for(self, stored_drug: str) -> BrandGeneric | None:
        return next((b for b in self.brands if stored_drug in b.generic_names), None)

    def class_names(self, drug_class: DrugClass) -> tuple[str, ...]:
        """A class's generic names and the brand names of its members (eICU records many drugs by brand)."""
        brands = [b.brand for b in self.brands if b.generic in drug_class.members or b.drug_class == drug_class.name]
        return tuple(dict.fromkeys([*drug_class.members, *brands]))


LAY_KINDS = ("diagnoses", "procedures", "labs", "vitals")


def load_lay_terms(directory: Path = DATA_DIR) -> LayTerms:
    """The curated tables `lay_terms.yaml` and `brand_generic.yaml` of `directory`."""
    lay = yaml.safe_load((directory / "lay_terms.yaml").read_text())
    drugs = yaml.safe_load((directory / "brand_generic.yaml").read_text())
    terms = {kind: tuple(LayTerm(kind, e["lay"], tuple(e.get("also", ())), tuple(e["values"])) for e in lay[kind])
             for kind in LAY_KINDS}
    classes = {name: DrugClass(name, c["lay"], tuple(c["members"])) for name, c in drugs["classes"].items()}
    brands = tuple(BrandGeneric(p["brand"], p["generic"], tuple(p.get("forms", ())), p.get("class"))
                   for p in drugs["pairs"])
    if unknown := sorted({b.drug_class for b in brands if b.drug_class} - set(classes)):
        raise ValueError(f"brand_generic.yaml: pairs name unknown classes {unknown}")
    alternatives = tuple(AlternativeLab(a["asked"], a["alternative"]) for a in lay["alternative_labs"])
    return LayTerms(terms, brands, classes, alternatives)


# ---------------------------------------------------------------------------------------------------------------
# stored values of the compatibility schemas (rename_sql makes the renamed forms)

ITEM_KINDS = {"diagnosis_name": "diagnoses", "procedure_name": "procedures", "lab_name": "labs",
              "drug_name": "drugs", "vital_name": "vitals"}
KIND_NOUNS = {"diagnoses": ("diagnosis", "diagnoses"), "procedures": ("procedure", "procedures"),
              "labs": ("lab test", "lab tests"), "drugs": ("medication", "medications"),
              "vitals": ("vital sign", "vital signs")}
# values that occur in the event tables, per database and kind
USED_VALUES: dict[str, dict[str, str]] = {
    "mimic_iv": {
        "diagnoses": "select distinct d_icd_diagnoses.long_title from diagnoses_icd join d_icd_diagnoses "
                     "on diagnoses_icd.icd_code = d_icd_diagnoses.icd_code",
        "procedures": "select distinct d_icd_procedures.long_title from procedures_icd join d_icd_procedures "
                      "on procedures_icd.icd_code = d_icd_procedures.icd_code",
        "labs": "select distinct d_labitems.label from labevents join d_labitems "
                "on labevents.itemid = d_labitems.itemid",
        "drugs": "select distinct prescriptions.drug from prescriptions",
        "vitals": "select distinct d_items.label from chartevents join d_items on chartevents.itemid = d_items.itemid",
    },
    "eicu": {
        "diagnoses": "select distinct diagnosis.diagnosisname from diagnosis",
        "procedures": "select distinct treatment.treatmentname from treatment",
        "labs": "select distinct lab.labname from lab",
        "drugs": "select distinct medication.drugname from medication",
    },
}
# values of the dictionaries (MIMIC-IV's hold the whole ICD code sets, most of them never used)
DICTIONARY_VALUES: dict[str, dict[str, str]] = {
    "mimic_iv": {"diagnoses": "select distinct long_title from d_icd_diagnoses",
                 "procedures": "select distinct long_title from d_icd_procedures",
                 "labs": "select distinct label from d_labitems", "vitals": "select distinct label from d_items"},
}


def item_kind(slot: str) -> str | None:
    """The curated kind of a value slot (diagnosis_name1 → diagnoses), or None for non-item slots."""
    return ITEM_KINDS.get(slot.rstrip("0123456789"))


# ---------------------------------------------------------------------------------------------------------------
# coverage of the curated tables on a database


@dataclass
class CoverageReport:
    """Per table: entries, entries matching stored values, and the entries that match nothing."""

    entries: Counter = field(default_factory=Counter)
    matched: Counter = field(default_factory=Counter)
    used: Counter = field(default_factory=Counter)  # entries with a value in the event tables
    unmatched: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, dict[str, int]]:
        return {name: {"entries": self.entries[name], "matched": self.matched[name], "used": self.used[name]}
                for name in self.entries}


def demo_coverage(lay_terms: LayTerms, databases: Mapping[str, Path]) -> CoverageReport:
    """How many curated entries match stored values of `databases` ({"mimic_iv" | "eicu": compatibility-schema
    DuckDB file}): lay terms by exact value (event tables, or MIMIC-IV's dictionaries); brand/generic pairs by the
    generic or the brand inside a stored drug name; classes by >= 2 members; alternative labs by the alternative's
    stored name. An entry matching nothing is listed in `unmatched`."""
    used: dict[str, set[str]] = {kind: set() for kind in (*LAY_KINDS, "drugs")}
    known: dict[str, set[str]] = {kind: set() for kind in LAY_KINDS}
    used_by_db: dict[str, dict[str, set[str]]] = {}
    for database, path in databases.items():
        con = duckdb.connect(str(path), read_only=True)
        try:
            values = {kind: {row[0] for row in con.execute(sql).fetchall() if row[0] is not None}
                      for kind, sql in USED_VALUES[database].items()}
            for kind, sql in DICTIONARY_VALUES.get(database, {}).items():
                known[kind] |= {row[0] for row in con.execute(sql).fetchall() if row[0] is not None}
        finally:
            con.close()
        used_by_db[database] = values
        for kind, found in values.items():
            used[kind] |= found
    report = CoverageReport()
    for kind in LAY_KINDS:
        for term in lay_terms.terms[kind]:
            report.entries[kind] += 1
            in_events = any(v in used[kind] for v in term.values)
            report.used[kind] += in_events
            if in_events or any(v in known[kind] for v in term.values):
                report.matched[kind] += 1
            else:
                report.unmatched.append(f"{kind}: {term.lay}")
    drugs = used["drugs"]
    for pair in lay_terms.brands:
        report.entries["brand_generic"] += 1
        exact = any(name in drugs for name in (*pair.generic_names, pair.brand))
        report.used["brand_generic"] += exact
        if exact or any(_contains_any(d, (pair.generic, pair.brand)) for d in drugs):
            report.matched["brand_generic"] += 1
        else:
            report.unmatched.append(f"brand_generic: {pair.brand}/{pair.generic}")
    for drug_class in lay_terms.classes.values():
        report.entries["drug_classes"] += 1
        present = [m for m in lay_terms.class_names(drug_class) if any(m in d for d in drugs)]
        if len(present) >= 2:
            report.matched["drug_classes"] += 1
            report.used["drug_classes"] += 1
        else:
            report.unmatched.append(f"drug_classes: {drug_class.name} (present: {present})")
    for pair in lay_terms.alternative_labs:
        report.entries["alternative_labs"] += 1
        present = any(pair.alternative.get(db) in found.get("labs", set()) for db, found in used_by_db.items())
        report.matched["alternative_labs"] += present
        report.used["alternative_labs"] += present
        if not present:
            report.unmatched.append(f"alternative_labs: {pair.asked['lay']} -> {pair.alternative['lay']}")
    return report


def _contains_any(text: str, names: Iterable[str]) -> bool:
    return any(name in text for name in names)


# ---------------------------------------------------------------------------------------------------------------
# the renamed database of a build


class _RenamedDatabase:
    """One database's renamed DuckDB and SQLite files (and its compatibility DuckDB file), read-only."""

    def __init__(self, database: str, rename: SchemaRename, build_dir: Path):
        self.database, self.rename = database, rename
        self.value_columns = {
            column: rename.table_name_values()
            for column in TABLE_NAME_COLUMNS.get(database, ()) if rename.has_table(column[0])}
        renamed_duckdb, renamed_sqlite = BenchmarkDatabase(RENAMED_PROFILE, database).files(build_dir)
        profile, name, _ = PROFILE_OF[database]
        compat_duckdb, _ = BenchmarkDatabase(profile, name).files(build_dir)
        self.duckdb = duckdb.connect(str(renamed_duckdb), read_only=True)
        self.compat = duckdb.connect(str(compat_duckdb), read_only=True)
        self.sqlite = sqlite3.connect(f"file:{renamed_sqlite}?mode=ro", uri=True)
        self._values: dict[str, set[str]] = {}

    def close(self) -> None:
        self.duckdb.close()
        self.compat.close()
        self.sqlite.close()

    def renamed(self, sql: str, dialect: str) -> str:
        return rename_sql(sql, self.rename, dialect=dialect, value_columns=self.value_columns)

    def used_values(self, kind: str) -> set[str]:
        """Stored values of `kind` in the event tables of the renamed database (what the agent can find)."""
        if kind not in self._values:
            sql = USED_VALUES[self.database].get(kind)
            rows = self.duckdb.execute(self.renamed(sql, "duckdb")).fetchall() if sql else []
            self._values[kind] = {row[0] for row in rows if row[0] is not None}
        return self._values[kind]

    def run(self, duckdb_sql: str, sqlite_sql: str) -> tuple[list[tuple], str]:
        """Rows of the renamed DuckDB query and the answer string of the renamed SQLite query."""
        rows = [tuple(plain_cell(c) for c in row) for row in run_duckdb(self.duckdb, duckdb_sql, TIMEOUT_S)]
        sqlite_rows = run_sqlite(self.sqlite, sqlite_sql, TIMEOUT_S)
        return rows, format_answer([tuple(plain_cell(c) for c in row) for row in sqlite_rows])


def _open(databases: Iterable[str], renames: Mapping[str, SchemaRename], build_dir: Path) -> dict:
    return {db: _RenamedDatabase(db, renames[f"{RENAMED_PROFILE}/{db}"], build_dir) for db in databases}


_EXECUTION_ERRORS = (duckdb.Error, sqlite3.Error, QueryTimeout)


# ---------------------------------------------------------------------------------------------------------------
# IncreQA

TOPICS = {"demographics": "demographics", "admissions": "hospital admissions", "icu_stays": "ICU stays",
          "diagnoses": "diagnoses", "procedures": "procedures", "prescriptions": "medication prescriptions",
          "labs": "lab tests", "vitals": "vital signs", "intake_output": "fluid intake and output",
          "microbiology": "microbiology tests", "cost": "hospital costs", "survival": "patient survival",
          "population": "patient statistics"}
SLOT_NOUNS = {"drug_route": "route of administration", "careunit": "care unit", "spec_name": "specimen",
              "lab_value": "lab value", "vital_value": "threshold value", "admission_route": "admission route",
              "input_name": "intake item", "output_name": "output item"}
OPERATOR_NOUNS = {"agg": "aggregate", "comparison": "comparison", "n_times": "number of times",
                  "n_rank": "top-N cutoff", "age_group": "age group", "survival_period": "survival period",
                  "unit_count": "time unit", "sort": "ordering", "unit_average": "averaging period"}
_OPENINGS = ("Your goal is to find information related to {topic}.", "You want to learn about {topic}.",
             "You are looking for information about {topic}.")
_LOOKUP_SENTENCES = (
    'When querying the DB agent, since you do not know how {name} is stored, use common terms like {terms} when '
    'referring to it, and let the DB agent find it for you.',
    'You do not know how {name} is stored in the database: when talking to the DB agent, use common terms like '
    '{terms} for it and let the DB agent find it.')


@dataclass(frozen=True)
class _SpokenItem:
    slot: str
    kind: str
    stored: str
    name: str  # what the user says
    terms: tuple[str, ...]  # common terms the user offers
    similar: tuple[str, ...]  # near-duplicate stored values the user does not mean


def incre_tasks(questions: Iterable[GeneratedQuestion], templates: Iterable[Template],
                renames: Mapping[str, SchemaRename], lay_terms: LayTerms, seed: int, build_dir: Path,
                *, dropped: Counter | None = None) -> list[GeneratedQuestion]:
    """IncreQA tasks (see the module doc) for the answerable, executed, non-empty ehrsql `questions` with an item
    that has a lay term (or, for a drug, a brand name the data does not use). `renames`: schema_renames(seed) (the
    `renamed/<db>` maps are used); `build_dir` holds db/renamed/<db>.duckdb|.sqlite. Reasons for dropping a
    candidate are counted in `dropped`."""
    dropped = dropped if dropped is not None else Counter()
    by_id = {t.id: t for t in templates}
    candidates = [q for q in questions if _executed(q) and q.template_id in by_id]
    databases = _open(sorted({q.db for q in candidates}), renames, build_dir)
    tasks = []
    try:
        for question in candidates:
            db = databases[question.db]
            items = _spoken_items(question, lay_terms, db)
            if not items:
                continue
            rng = keyed_rng(seed, f"{SUITE}|incre|{question.question_id}")
            task = _incre_task(question, by_id[question.template_id], items, db, rng, dropped)
            if task is not None:
                tasks.append(task)
    finally:
        for db in databases.values():
            db.close()
    return tasks


def _executed(q: GeneratedQuestion) -> bool:
    return (q.suite == "ehrsql" and q.is_answerable and q.answer is not None and not q.execution_error
            and not q.empty_answer and q.gold_sql_sqlite is not None and not q.sqlite_error)


def _spoken_items(question: GeneratedQuestion, lay_terms: LayTerms, db: _RenamedDatabase) -> list[_SpokenItem]:
    items = []
    for slot, value in json.loads(question.slot_values).items():
        kind = item_kind(slot)
        if kind is None or not isinstance(value, str):
            continue
        used = db.used_values(kind)
        if kind == "drugs":
            pair = lay_terms.brand_for(value)
            # a brand the data also records would name another value: asking by it would be ambiguous
            if pair is None or pair.brand in used:
                continue
            names, same = [pair.brand[:1].upper() + pair.brand[1:]], set(pair.generic_names)
        else:
            term = lay_terms.term_for(kind, value)
            names = term.names_for(value) if term else []
            if not names:
                continue
            same = set(term.values)
        # a name that is another stored value would point the agent at that value
        names = [n for n in names if n.lower() not in used]
        if not names:
            continue
        similar = _near_duplicates(value, used, same)
        items.append(_SpokenItem(slot, kind, value, names[0], tuple(names[:3]), tuple(similar)))
    return items


def _near_duplicates(value: str, used: set[str], same_concept: set[str], limit: int = 3) -> list[str]:
    """Stored values an agent could mistake for `value`: containing it, contained in it, or of the same concept."""
    similar = {v for v in used if v != value and (value in v or (len(v) >= 4 and v in value) or v in same_concept)}
    return sorted(similar, key=lambda v: (len(v), v))[:limit]


def _incre_task(question: GeneratedQuestion, template: Template, items: list[_SpokenItem], db: _RenamedDatabase,
                rng: np.random.Generator, dropped: Counter) -> GeneratedQuestion | None:
    try:
        gold_duckdb = db.renamed(question.gold_sql_duckdb, "duckdb")
        gold_sqlite = db.renamed(question.gold_sql_sqlite, "sqlite")
    except ValueError:
        dropped["incre: gold SQL not renamable"] += 1
        return None
    started = time.perf_counter()
    try:
        rows, sqlite_answer = db.run(gold_duckdb, gold_sqlite)
    except _EXECUTION_ERRORS:
        dropped["incre: renamed gold SQL fails"] += 1
        return None
    answer = format_answer(rows)
    if answer != question.answer_text or sqlite_answer != question.answer_text:
        dropped["incre: answer differs on the renamed database"] += 1
        return None
    instruction, lay_question = incre_instruction(question, template, items, rng)
    return GeneratedQuestion(
        question_id=_task_id("incre", question.question_id), suite=SUITE, db=question.db,
        template_id=question.template_id, category=question.category, is_answerable=True,
        patient_scoped=question.patient_scoped, question=instruction, template_question=lay_question,
        slot_values=question.slot_values, slot_texts=question.slot_texts, time_kinds=question.time_kinds,
        current_time=question.current_time, gold_sql_duckdb=gold_duckdb, gold_sql_sqlite=gold_sqlite,
        answer=json.dumps(rows, default=json_value), answer_text=answer, answer_rows=len(rows),
        empty_answer=False, empty_by_design=False, max_rows=question.max_rows,
        execution_s=round(time.perf_counter() - started, 4), execution_error=None, sqlite_answer_text=sqlite_answer,
        sqlite_error=None,
        extra={"task_type": "incre", "db_id": f"{RENAMED_PROFILE}/{question.db}",
               "source_question_id": question.question_id,
               "lay_terms": {i.slot: {"stored": i.stored, "said": i.name, "terms": list(i.terms),
                                      "similar": list(i.similar)} for i in items}})


def incre_instruction(question: GeneratedQuestion, template: Template, items: list[_SpokenItem],
                      rng: np.random.Generator) -> tuple[str, str]:
    """The user instruction, and the question itself with the items' lay names."""
    texts = json.loads(question.slot_texts)
    spoken = {item.slot: item for item in items}
    said = {slot: spoken[slot].name if slot in spoken else text for slot, text in texts.items()}
    lay_question = fill_texts(template.question, said)
    topic = TOPICS.get(question.category, question.category.replace("_", " "))
    topic = f"a specific patient's {topic}" if question.patient_scoped else topic
    # the patient first, then the items and other values, then operators and time expressions
    order = sorted(slot_order(template.question), key=lambda slot: (
        slot != "patient_id", slot not in spoken, slot in template.operators or slot in template.time))
    steps = [_step(slot, said[slot], template, spoken.get(slot)) for slot in order if said.get(slot)]
    sentences = [_OPENINGS[int(rng.integers(len(_OPENINGS)))].format(topic=topic),
                 f"Specifically, you want to know: {lay_question}",
                 "Step by step, you tell the DB agent: "
                 + "; ".join(f"({n}) {step}" for n, step in enumerate(steps, 1)) + "."]
    lookup = _LOOKUP_SENTENCES[int(rng.integers(len(_LOOKUP_SENTENCES)))]
    for item in items:
        singular, plural = KIND_NOUNS[item.kind]
        if item.similar:
            sentences.append(f"You want to search for {item.name} specifically, not other similar {plural} like "
                             f"{_or_list(item.similar)}.")
        sentences.append(lookup.format(name=item.name, terms=_or_list(item.terms)))
    return " ".join(sentences), lay_question


def _step(slot: str, text: str, template: Template, item: _SpokenItem | None) -> str:
    if item is not None:
        return f"the {KIND_NOUNS[item.kind][0]} is {text}"
    if slot == "patient_id":
        return f"the patient is patient ID {text}"
    if slot in template.operators:
        return f"the {OPERATOR_NOUNS.get(slot, slot.replace('_', ' '))} is {text}"
    if slot in template.time:
        family = time_family(slot)
        if family == "exact":
            return f"you want the {text} one"
        if family == "within":
            return f"the events happen {text}"
        return f"the time frame is {text}"
    base = slot.rstrip("0123456789")
    return f"the {SLOT_NOUNS.get(base, base.replace('_', ' '))} is {text}"


def _or_list(names: Iterable[str]) -> str:
    quoted = [f'"{n}"' for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


# ---------------------------------------------------------------------------------------------------------------
# AdaptQA


@dataclass(frozen=True)
class _EventSource:
    """Where a database records drugs or lab results, in compatibility-schema SQL."""

    source: str  # FROM ... [JOIN ...]
    name: str  # the stored drug / lab name column
    patient: str  # the patient id column
    stay: str  # the hospital admission (stay) id column
    time: str
    value: str | None = None  # lab result value


DRUG_SOURCES = {
    "mimic_iv": _EventSource("prescriptions", "prescriptions.drug", "prescriptions.subject_id",
                             "prescriptions.hadm_id", "prescriptions.starttime"),
    "eicu": _EventSource("medication join patient on medication.patientunitstayid = patient.patientunitstayid",
                         "medication.drugname", "patient.uniquepid", "patient.patienthealthsystemstayid",
                         "medication.drugstarttime"),
}
LAB_SOURCES = {
    "mimic_iv": _EventSource("labevents join d_labitems on labevents.itemid = d_labitems.itemid", "d_labitems.label",
                             "labevents.subject_id", "labevents.hadm_id", "labevents.charttime",
                             "labevents.valuenum"),
    "eicu": _EventSource("lab join patient on lab.patientunitstayid = patient.patientunitstayid", "lab.labname",
                         "patient.uniquepid", "patient.patienthealthsystemstayid", "lab.labresulttime",
                         "lab.labresult"),
}


@dataclass(frozen=True)
class _Shape:
    """One AdaptQA task shape: what is asked of the chosen events, in words and as the final SELECT."""

    id: str
    patient_scoped: bool
    ask: str  # the request, with {subject} (e.g. "a medication recorded exactly as 'lipitor'") and {patient}
    select: str  # over `chosen` (columns patient_id, stay_id, event_time, value)
    empty_if: str  # the user's words for "nothing found"


_DRUG_SHAPES = (
    _Shape("patient_count", False, "the number of patients prescribed {subject}",
           "select count(distinct chosen.patient_id) from chosen", "no patients are prescribed"),
    _Shape("stay_count", False, "the number of hospital stays during which {subject} was prescribed",
           "select count(distinct chosen.stay_id) from chosen", "no hospital stays have a prescription"),
    _Shape("patient_first_time", True, "when patient ID {patient} was first prescribed {subject}",
           "select min(chosen.event_time) from chosen", "patient ID {patient} has no prescription"),
)
_LAB_SHAPES = (
    _Shape("patient_count", False, "the number of patients who had a result of {subject}",
           "select count(distinct chosen.patient_id) from chosen", "no results are recorded"),
    _Shape("patient_max_value", True, "the highest value of {subject} ever measured for patient ID {patient}",
           "select max(chosen.value) from chosen", "patient ID {patient} has no result"),
    _Shape("patient_last_time", True, "when patient ID {patient} last had a result of {subject}",
           "select max(chosen.event_time) from chosen", "patient ID {patient} has no result"),
)


@dataclass(frozen=True)
class _AdaptCase:
    category: str  # brand_generic | alternative_lab | drug_class
    key: str  # what the case is about (seeded choice, task id)
    asked: str  # the exact stored name asked for
    fallback: tuple[str, ...]  # names the fallback matches (contained, or exactly for labs)
    exact_fallback: bool
    subject: str  # "a medication recorded exactly as 'lipitor'"
    fallback_words: str  # the user's fallback, in words
    source: _EventSource
    topic: str


def adapt_tasks(lay_terms: LayTerms, renames: Mapping[str, SchemaRename], seed: int, build_dir: Path,
                current_time: str, *, databases: Iterable[str] = ("mimic_iv", "eicu"), per_shape: int = 2,
                dropped: Counter | None = None) -> list[GeneratedQuestion]:
    """AdaptQA tasks (see the module doc) for each of `databases`: per category the data supports, `per_shape`
    seeded cases per task shape. A case applies when its asked name is absent from the renamed database and its
    fallback present; patient-scoped shapes draw a patient with fallback events."""
    dropped = dropped if dropped is not None else Counter()
    opened = _open(list(databases), renames, build_dir)
    tasks = []
    try:
        for database, db in opened.items():
            for category, cases in _adapt_cases(lay_terms, database, db).items():
                shapes = _DRUG_SHAPES if category != "alternative_lab" else _LAB_SHAPES
                for shape in shapes:
                    rng = keyed_rng(seed, f"{SUITE}|adapt|{database}|{category}|{shape.id}")
                    for index in rng.permutation(len(cases))[:per_shape]:
                        task = _adapt_task(cases[int(index)], shape, database, db, rng, current_time, dropped)
                        if task is not None:
                            tasks.append(task)
    finally:
        for db in opened.values():
            db.close()
    return tasks


def _adapt_cases(lay_terms: LayTerms, database: str, db: _RenamedDatabase) -> dict[str, list[_AdaptCase]]:
    drugs, labs = db.used_values("drugs"), db.used_values("labs")
    source = DRUG_SOURCES[database]
    brand_cases = [
        _AdaptCase("brand_generic", pair.brand, pair.brand, (pair.generic,), False,
                   f"a medication recorded exactly as '{pair.brand}'",
                   "medications whose name contains its generic name", source, "medication prescriptions")
        for pair in lay_terms.brands
        if pair.brand not in drugs and any(pair.generic in d for d in drugs)]
    class_cases = []
    for drug_class in lay_terms.classes.values():
        names = lay_terms.class_names(drug_class)
        present = [n for n in names if any(n in d for d in drugs)]
        for member in drug_class.members:
            # absent even inside longer names, so that only the class can answer
            if present and not any(member in d for d in drugs):
                class_cases.append(_AdaptCase(
                    "drug_class", member, member, tuple(names), False, f"a medication recorded exactly as '{member}'",
                    f"any medication of the same drug class ({drug_class.lay}), recorded under a generic or brand name",
                    source, "medication prescriptions"))
    lab_cases = [
        _AdaptCase("alternative_lab", pair.asked["lay"], pair.asked[database], (pair.alternative[database],), True,
                   f"a lab test recorded exactly as '{pair.asked[database]}'",
                   f"results of {pair.alternative['lay']} instead", LAB_SOURCES[database], "lab tests")
        for pair in lay_terms.alternative_labs
        if pair.asked.get(database) and pair.asked[database] not in labs and pair.alternative.get(database) in labs]
    return {name: cases for name, cases in
            (("brand_generic", brand_cases), ("alternative_lab", lab_cases), ("drug_class", class_cases)) if cases}


def adapt_sql(case: _AdaptCase, shape: _Shape, patient: object | None = None) -> str:
    """The gold SQL (DuckDB, compatibility schema): the asked events if any exist, else the fallback's."""
    s = case.source
    columns = (f"{s.patient} as patient_id, {s.stay} as stay_id, {s.time} as event_time, "
               f"{s.value or 'null'} as value")
    scope = f" and {s.patient} = {sql_literal(patient)}" if shape.patient_scoped else ""
    if case.exact_fallback:
        fallback = " or ".join(f"{s.name} = {sql_literal(name)}" for name in case.fallback)
    else:
        fallback = " or ".join(f"{s.name} like {sql_literal('%' + name + '%')}" for name in case.fallback)
    return (f"with asked as (select {columns} from {s.source} where {s.name} = {sql_literal(case.asked)}{scope}), "
            f"fallback as (select {columns} from {s.source} where ({fallback}){scope}), "
            "chosen as (select asked.patient_id, asked.stay_id, asked.event_time, asked.value from asked "
            "union all select fallback.patient_id, fallback.stay_id, fallback.event_time, fallback.value "
            "from fallback where not exists (select 1 from asked)) "
            f"{shape.select}")


def _adapt_task(case: _AdaptCase, shape: _Shape, database: str, db: _RenamedDatabase, rng: np.random.Generator,
                current_time: str, dropped: Counter) -> GeneratedQuestion | None:
    patient = _draw_patient(case, db, rng) if shape.patient_scoped else None
    if shape.patient_scoped and patient is None:
        dropped["adapt: no patient with fallback events"] += 1
        return None
    sql = adapt_sql(case, shape, patient)
    try:
        gold_duckdb = db.renamed(sql, "duckdb")
        gold_sqlite = db.renamed(to_sqlite(sql), "sqlite")
    except (ValueError, UntranspilableSql):
        dropped["adapt: gold SQL not renamable"] += 1
        return None
    started = time.perf_counter()
    try:
        rows, sqlite_answer = db.run(gold_duckdb, gold_sqlite)
        compat_answer = format_answer(run_duckdb(db.compat, sql, TIMEOUT_S))
    except _EXECUTION_ERRORS:
        dropped["adapt: gold SQL fails"] += 1
        return None
    answer = format_answer(rows)
    if answer != sqlite_answer or all(cell in (None, 0) for row in rows for cell in row):
        dropped["adapt: dialects differ or nothing found"] += 1
        return None
    subject_words = {"subject": case.subject, "patient": patient}
    ask = shape.ask.format(**subject_words)
    none_found = shape.empty_if.format(**subject_words)
    instruction = (f"Your goal is to explore {case.topic}. Specifically, you want to know {ask}. If "
                   f"{none_found} under the exact name '{case.asked}', you want to ask the same question using "
                   f"{case.fallback_words}.")
    key = f"{database}|{case.category}|{shape.id}|{case.key}|{patient}"
    slot_values = {"asked": case.asked, "fallback": list(case.fallback)} | ({"patient_id": patient} if patient else {})
    return GeneratedQuestion(
        question_id=_task_id("adapt", key), suite=SUITE, db=database, template_id=f"adapt_{case.category}_{shape.id}",
        category="labs" if case.category == "alternative_lab" else "prescriptions", is_answerable=True,
        patient_scoped=shape.patient_scoped, question=instruction, template_question=instruction,
        slot_values=json.dumps(slot_values, default=json_value), slot_texts=json.dumps({}), time_kinds=json.dumps({}),
        current_time=current_time, gold_sql_duckdb=gold_duckdb, gold_sql_sqlite=gold_sqlite,
        answer=json.dumps(rows, default=json_value), answer_text=answer, answer_rows=len(rows), empty_answer=False,
        empty_by_design=False, max_rows=100, execution_s=round(time.perf_counter() - started, 4),
        execution_error=None, sqlite_answer_text=sqlite_answer, sqlite_error=None,
        extra={"task_type": "adapt", "db_id": f"{RENAMED_PROFILE}/{database}", "adapt_category": case.category,
               "asked": case.asked, "fallback": list(case.fallback), "branch": _branch(case, patient, shape, db),
               "compat_sql": sql, "compat_answer_matches": compat_answer == answer})


def _draw_patient(case: _AdaptCase, db: _RenamedDatabase, rng: np.random.Generator) -> object | None:
    """A patient with fallback events (seeded, from the sorted list), so that the question has an answer."""
    s = case.source
    matches = " or ".join(f"{s.name} = {sql_literal(n)}" if case.exact_fallback else
                          f"{s.name} like {sql_literal('%' + n + '%')}" for n in case.fallback)
    sql = f"select distinct {s.patient} from {s.source} where {matches} order by 1"
    patients = [row[0] for row in db.duckdb.execute(db.renamed(sql, "duckdb")).fetchall()]
    return patients[int(rng.integers(len(patients)))] if patients else None


def _branch(case: _AdaptCase, patient: object | None, shape: _Shape, db: _RenamedDatabase) -> str:
    s = case.source
    scope = f" and {s.patient} = {sql_literal(patient)}" if shape.patient_scoped else ""
    sql = f"select count(*) from {s.source} where {s.name} = {sql_literal(case.asked)}{scope}"
    return "asked" if db.duckdb.execute(db.renamed(sql, "duckdb")).fetchone()[0] else "fallback"


# ---------------------------------------------------------------------------------------------------------------
# export


def chatqa_export(tasks: Iterable[GeneratedQuestion], build_dir: Path) -> dict[str, str]:
    """`exports/chatqa/<db>_{incre,adapt}.json` in EHR-ChatQA's task format ({task_id, task_type, db_id,
    instruction, gold_sql: SQLite over the renamed schema, gold_answer: rows}), plus `task_ids.json` mapping each
    file's task ids to question ids. db_id is EHR-ChatQA's name for the renamed database (mimic_iv_star, eicu_star),
    so that their agents and scorers pick the right environment. Written once: refuses to overwrite."""
    groups: dict[str, list[GeneratedQuestion]] = {}
    for task in tasks:
        if task.suite == SUITE:
            groups.setdefault(f"{task.db}_{task.extra['task_type']}", []).append(task)
    folder = build_dir / "exports" / "chatqa"
    names = [f"{group}.json" for group in sorted(groups)] + ["task_ids.json"]
    if existing := [name for name in names if (folder / name).exists()]:
        raise FileExistsError(f"{folder}: {existing} exist; chatqa exports of a build are written once")
    files, ids = {}, {}
    for group, items in sorted(groups.items()):
        records = [{"task_id": str(n), "task_type": t.extra["task_type"], "db_id": CHATQA_DB_IDS[t.db],
                    "instruction": t.question, "gold_sql": t.gold_sql_sqlite, "gold_answer": json.loads(t.answer)}
                   for n, t in enumerate(items)]
        ids[group] = {str(n): t.question_id for n, t in enumerate(items)}
        files[group] = _write_json(folder / f"{group}.json", records, build_dir)
    files["task_ids"] = _write_json(folder / "task_ids.json", ids, build_dir)
    return files


def _write_json(path: Path, content: object, build_dir: Path) -> str:
    text = json.dumps(content, ensure_ascii=False, indent=4) + "\n"
    write_once(path, lambda tmp: tmp.write_text(text))
    return str(path.relative_to(build_dir))


def _task_id(task_type: str, key: str) -> str:
    return hashlib.sha1(f"{SUITE}|{task_type}|{key}".encode()).hexdigest()[:24]
