"""chatqa suite (ehrbench.questions.chatqa): IncreQA instructions with lay terms, AdaptQA fallbacks, the
EHR-ChatQA export, and the coverage check of the curated tables, on a hand-made build: a compatibility-schema
MIMIC-IV database (a few tables) and its copy under renamed names, each as DuckDB and SQLite files."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from ehrbench.questions.chatqa import (
    DRUG_SOURCES,
    AlternativeLab,
    BrandGeneric,
    DrugClass,
    LayTerm,
    LayTerms,
    adapt_sql,
    adapt_tasks,
    chatqa_export,
    demo_coverage,
    incre_tasks,
    load_lay_terms,
)
from ehrbench.questions.chatqa.adapt_cases import _DRUG_SHAPES, _AdaptCase
from ehrbench.questions.generate import GenerationSettings, generate_questions
from ehrbench.questions.templates import Template
from ehrbench.renaming import SchemaRename, TableRename

NOW = datetime(2100, 12, 31, 23, 59)
# compatibility-schema tables: (source column, renamed column, SQL type)
TEXT, INT, TIME, REAL = "varchar", "integer", "timestamp", "double"
TABLES: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    "admissions": ("hospitalvisits", [("subject_id", "patientid", INT), ("hadm_id", "visitid", INT),
                                      ("admittime", "admitted", TIME), ("dischtime", "discharged", TIME)]),
    "d_labitems": ("labtypes", [("itemid", "code", INT), ("label", "name", TEXT)]),
    "labevents": ("labresults", [("subject_id", "patientid", INT), ("hadm_id", "visitid", INT), ("itemid", "code", INT),
                                 ("charttime", "resulttime", TIME), ("valuenum", "result", REAL)]),
    "prescriptions": ("medicationorders", [("subject_id", "patientid", INT), ("hadm_id", "visitid", INT),
                                           ("starttime", "started", TIME), ("drug", "medication", TEXT)]),
    "d_icd_diagnoses": ("diagnosiscodes", [("icd_code", "icdcode", TEXT), ("long_title", "description", TEXT)]),
    "diagnoses_icd": ("admissiondiagnoses", [("subject_id", "patientid", INT), ("hadm_id", "visitid", INT),
                                             ("icd_code", "icdcode", TEXT), ("charttime", "recorded", TIME)]),
    "d_icd_procedures": ("procedurecodes", [("icd_code", "icdcode", TEXT), ("long_title", "description", TEXT)]),
    "procedures_icd": ("admissionprocedures", [("hadm_id", "visitid", INT), ("icd_code", "icdcode", TEXT)]),
    "d_items": ("itemtypes", [("itemid", "code", INT), ("label", "name", TEXT)]),
    "chartevents": ("clinicalevents", [("itemid", "code", INT), ("valuenum", "value", REAL)]),
}
ROWS: dict[str, list[tuple]] = {
    "admissions": [(1, 11, "2100-01-01 08:00:00", "2100-01-05 12:00:00"),
                   (1, 12, "2100-03-01 08:00:00", "2100-03-04 12:00:00"),
                   (2, 21, "2100-02-01 08:00:00", "2100-02-09 12:00:00")],
    "d_labitems": [(1, "hemoglobin"), (2, "% hemoglobin a1c"), (3, "troponin t"), (4, "creatinine")],
    "labevents": [(1, 11, 1, "2100-01-02 06:00:00", 11.0), (1, 12, 1, "2100-03-02 06:00:00", 9.5),
                  (1, 12, 2, "2100-03-02 06:00:00", 6.1), (2, 21, 3, "2100-02-02 06:00:00", 0.03),
                  (2, 21, 1, "2100-02-03 06:00:00", 12.5), (2, 21, 4, "2100-02-03 06:00:00", 1.1)],
    "prescriptions": [(1, 11, "2100-01-02 09:00:00", "furosemide"), (1, 12, "2100-03-02 09:00:00", "furosemide"),
                      (1, 12, "2100-03-02 10:00:00", "atorvastatin"), (2, 21, "2100-02-02 09:00:00", "simvastatin"),
                      (2, 21, "2100-02-03 09:00:00", "furosemide")],
    "d_icd_diagnoses": [("icd9|4019", "unspecified essential hypertension"), ("icd9|5849", "acute kidney failure")],
    "diagnoses_icd": [(1, 11, "icd9|4019", "2100-01-01 08:00:00")],
    "d_icd_procedures": [], "procedures_icd": [], "d_items": [], "chartevents": [],
}
RENAME = SchemaRename("mimic_iv", tuple(
    TableRename(source, target, tuple((s, t) for s, t, _ in columns)) for source, (target, columns) in TABLES.items()))

LAY_TERMS = LayTerms(
    terms={"diagnoses": (LayTerm("diagnoses", "high blood pressure", ("HTN",), ("unspecified essential hypertension",)),
                         LayTerm("diagnoses", "breast cancer", (), ("malignant neoplasm of breast",))),
           "procedures": (), "vitals": (),
           "labs": (LayTerm("labs", "Hb", ("Hgb", "hemoglobin"), ("hemoglobin",)),)},
    brands=(BrandGeneric("lasix", "furosemide", drug_class="loop diuretics"),
            BrandGeneric("lipitor", "atorvastatin", drug_class="statins"),
            BrandGeneric("zocor", "simvastatin", drug_class="statins")),
    classes={"statins": DrugClass("statins", "statins", ("atorvastatin", "simvastatin", "lovastatin")),
             "loop diuretics": DrugClass("loop diuretics", "water pills", ("furosemide", "bumetanide"))},
    alternative_labs=(AlternativeLab({"lay": "troponin I", "mimic_iv": "troponin i"},
                                     {"lay": "troponin T", "mimic_iv": "troponin t"}),),
)


def _template(**fields) -> Template:
    question = fields["question"]
    return Template.model_validate({"phrasings": [question, question, question], **fields})


TEMPLATES = [
    _template(
        id="lab_value_agg", category="labs",
        question="What was the {agg} value of the {lab_name} lab test of patient {patient_id} {time}?",
        operators=["agg"], time={"time": ["none", "hospital_visit"]},
        values={"mimic_iv": "select labevents.subject_id as patient_id, d_labitems.label as lab_name from labevents "
                            "join d_labitems on labevents.itemid = d_labitems.itemid where d_labitems.label = "
                            "'hemoglobin'"},
        sql={"mimic_iv": "select {{ agg }}(labevents.valuenum) from labevents where labevents.itemid in (select "
                         "d_labitems.itemid from d_labitems where d_labitems.label = {{ lab_name }}) and "
                         "labevents.hadm_id in (select admissions.hadm_id from admissions where "
                         "admissions.subject_id = {{ patient_id }} {{ time.visit('admissions') }})"}),
    _template(
        id="drug_count", category="prescriptions",
        question="How many times was patient {patient_id} prescribed {drug_name}?",
        values={"mimic_iv": "select subject_id as patient_id, drug as drug_name from prescriptions"},
        sql={"mimic_iv": "select count(*) from prescriptions where prescriptions.subject_id = {{ patient_id }} "
                         "and prescriptions.drug = {{ drug_name }}"}),
    _template(
        id="diagnosis_check", category="diagnoses",
        question="Has patient {patient_id} been diagnosed with {diagnosis_name}?",
        values={"mimic_iv": "select diagnoses_icd.subject_id as patient_id, d_icd_diagnoses.long_title as "
                            "diagnosis_name from diagnoses_icd join d_icd_diagnoses on diagnoses_icd.icd_code = "
                            "d_icd_diagnoses.icd_code"},
        sql={"mimic_iv": "select count(*) > 0 from diagnoses_icd where diagnoses_icd.icd_code = (select "
                         "d_icd_diagnoses.icd_code from d_icd_diagnoses where d_icd_diagnoses.long_title = "
                         "{{ diagnosis_name }}) and diagnoses_icd.subject_id = {{ patient_id }}"}),
]


def _write(folder: Path, name: str, tables: dict[str, tuple[str, list[tuple[str, str, str]]]], renamed: bool,
           rows: dict[str, list[tuple]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(folder / f"{name}.duckdb"))
    lite = sqlite3.connect(folder / f"{name}.sqlite")
    for source, (target, columns) in tables.items():
        table = target if renamed else source
        names = [t if renamed else s for s, t, _ in columns]
        typed = ", ".join(f"{n} {kind}" for n, (_, _, kind) in zip(names, columns, strict=True))
        con.execute(f"create table {table} ({typed})")
        lite.execute(f"create table {table} ({', '.join(names)})")
        marks = ", ".join("?" * len(columns))
        for row in rows[source]:
            con.execute(f"insert into {table} values ({marks})", list(row))
            lite.execute(f"insert into {table} values ({marks})", row)
    lite.commit()
    lite.close()
    con.close()


def _build(root: Path, renamed_rows: dict[str, list[tuple]] = ROWS) -> Path:
    _write(root / "db" / "ehrsql2024", "mimic_iv", TABLES, False, ROWS)
    _write(root / "db" / "renamed", "mimic_iv", TABLES, True, renamed_rows)
    return root


@pytest.fixture
def build(tmp_path: Path) -> Path:
    return _build(tmp_path / "build")


@pytest.fixture
def questions(build: Path):
    compat = build / "db" / "ehrsql2024"
    return generate_questions(TEMPLATES, "mimic_iv", compat / "mimic_iv.duckdb", compat / "mimic_iv.sqlite", NOW,
                              GenerationSettings(per_template=6, empty_share=0.0, unanswerable_share=None))


RENAMES = {"renamed/mimic_iv": RENAME}


def _incre(questions, build: Path, seed: int = 0, dropped: Counter | None = None):
    return incre_tasks(questions, TEMPLATES, RENAMES, LAY_TERMS, seed, build, dropped=dropped)


def test_incre_names_items_by_lay_terms_and_states_every_constraint(questions, build):
    tasks = _incre(questions, build)
    assert {t.template_id for t in tasks} == {"lab_value_agg", "drug_count", "diagnosis_check"}
    for task in tasks:
        assert task.suite == "chatqa" and task.extra["task_type"] == "incre"
        assert task.extra["db_id"] == "renamed/mimic_iv"
        texts = json.loads(task.slot_texts)
        said = task.extra["lay_terms"]
        for slot, text in texts.items():
            expected = said[slot]["said"] if slot in said else text
            assert expected in task.question, (slot, task.question)
        for item in said.values():
            assert item["stored"] not in task.template_question  # the stored wording is never the user's
            assert f"since you do not know how {item['said']} is stored" in task.question or \
                f"You do not know how {item['said']} is stored" in task.question
    by_template = {t.template_id: t for t in tasks}
    assert "Hb" in by_template["lab_value_agg"].question
    assert 'not other similar lab tests like "% hemoglobin a1c"' in by_template["lab_value_agg"].question
    assert "Lasix" in by_template["drug_count"].question or "lasix" in by_template["drug_count"].question
    assert "high blood pressure" in by_template["diagnosis_check"].question


def test_incre_gold_sql_runs_on_the_renamed_database_with_the_same_answer(questions, build):
    sources = {q.question_id: q for q in questions}
    tasks = _incre(questions, build)
    lite = sqlite3.connect(build / "db" / "renamed" / "mimic_iv.sqlite")
    con = duckdb.connect(str(build / "db" / "renamed" / "mimic_iv.duckdb"), read_only=True)
    for task in tasks:
        source = sources[task.extra["source_question_id"]]
        assert "labevents" not in task.gold_sql_sqlite and "prescriptions" not in task.gold_sql_duckdb
        assert task.answer_text == source.answer_text
        assert [list(r) for r in lite.execute(task.gold_sql_sqlite).fetchall()] == json.loads(task.answer)
        assert con.execute(task.gold_sql_duckdb).fetchall() is not None


def test_incre_drops_and_counts_tasks_whose_renamed_answer_differs(questions, tmp_path):
    other_values = dict(ROWS, labevents=[(*row[:4], row[4] + 1) for row in ROWS["labevents"]])
    build = _build(tmp_path / "other", renamed_rows=other_values)
    dropped = Counter()
    tasks = _incre(questions, build, dropped=dropped)
    assert tasks and all(t.template_id != "lab_value_agg" for t in tasks)
    assert dropped["incre: answer differs on the renamed database"] >= 1


def _stable(tasks) -> list[dict]:
    return [{k: v for k, v in t.to_dict().items() if k != "execution_s"} for t in tasks]


def test_incre_is_deterministic_by_seed(questions, build):
    first = _stable(_incre(questions, build, seed=3))
    assert first == _stable(_incre(questions, build, seed=3))
    other = _stable(_incre(questions, build, seed=4))
    assert [t["question_id"] for t in other] == [t["question_id"] for t in first]  # ids name the source, not the seed


def _statin_case(brand: str = "lipitor") -> _AdaptCase:
    return _AdaptCase("brand_generic", brand, brand, ("atorvastatin",), False,
                      f"a medication recorded exactly as '{brand}'", "medications whose name contains its generic name",
                      DRUG_SOURCES["mimic_iv"], "medication prescriptions")


def test_adapt_fallback_takes_the_generic_when_the_brand_is_absent_and_the_brand_when_present(build):
    con = duckdb.connect(str(build / "db" / "ehrsql2024" / "mimic_iv.duckdb"))
    count_patients = _DRUG_SHAPES[0]
    sql = adapt_sql(_statin_case(), count_patients)
    assert con.execute(sql).fetchall() == [(1,)]  # no 'lipitor': the atorvastatin patient
    con.execute("insert into prescriptions values (2, 21, '2100-02-04 09:00:00', 'lipitor'), "
                "(1, 11, '2100-01-03 09:00:00', 'lipitor')")
    con.execute("insert into prescriptions values (3, 31, '2100-02-04 09:00:00', 'lipitor')")
    assert con.execute(sql).fetchall() == [(3,)]  # 'lipitor' recorded: only its patients count


def test_adapt_tasks_cover_the_categories_the_data_supports(build):
    dropped = Counter()
    tasks = adapt_tasks(LAY_TERMS, RENAMES, 0, build, "2100-12-31 23:59:00", databases=["mimic_iv"], dropped=dropped)
    categories = Counter(t.extra["adapt_category"] for t in tasks)
    assert set(categories) == {"brand_generic", "alternative_lab", "drug_class"}
    lite = sqlite3.connect(build / "db" / "renamed" / "mimic_iv.sqlite")
    for task in tasks:
        assert task.extra["branch"] == "fallback" and task.extra["compat_answer_matches"]
        assert "prescriptions" not in task.gold_sql_sqlite and "labevents" not in task.gold_sql_sqlite
        assert [list(r) for r in lite.execute(task.gold_sql_sqlite).fetchall()] == json.loads(task.answer)
        assert f"exactly as '{task.extra['asked']}'" in task.question
    asked = {t.extra["asked"] for t in tasks}
    assert {"lasix", "lipitor", "troponin i", "lovastatin"} <= asked
    assert "atorvastatin" not in asked  # a class member the data records is never asked as absent
    again = adapt_tasks(LAY_TERMS, RENAMES, 0, build, "2100-12-31 23:59:00", databases=["mimic_iv"])
    assert _stable(again) == _stable(tasks)


def test_export_writes_ehr_chatqa_task_files_once(questions, build):
    tasks = _incre(questions, build) + adapt_tasks(LAY_TERMS, RENAMES, 0, build, "2100-12-31 23:59:00",
                                                   databases=["mimic_iv"])
    files = chatqa_export(tasks, build)
    assert set(files) == {"mimic_iv_incre", "mimic_iv_adapt", "task_ids"}
    lite = sqlite3.connect(build / "db" / "renamed" / "mimic_iv.sqlite")
    for kind in ("incre", "adapt"):
        records = json.loads((build / files[f"mimic_iv_{kind}"]).read_text())
        assert [r["task_id"] for r in records] == [str(n) for n in range(len(records))]
        for record in records:
            assert set(record) == {"task_id", "task_type", "db_id", "instruction", "gold_sql", "gold_answer"}
            assert record["task_type"] == kind and record["db_id"] == "mimic_iv_star"
            assert [list(r) for r in lite.execute(record["gold_sql"]).fetchall()] == record["gold_answer"]
    with pytest.raises(FileExistsError):
        chatqa_export(tasks, build)


def test_coverage_reports_entries_without_stored_values(build):
    report = demo_coverage(LAY_TERMS, {"mimic_iv": build / "db" / "ehrsql2024" / "mimic_iv.duckdb"})
    assert report.summary()["diagnoses"] == {"entries": 2, "matched": 1, "used": 1}
    assert report.unmatched == ["diagnoses: breast cancer", "drug_classes: loop diuretics (present: ['furosemide'])"]
    assert report.summary()["alternative_labs"]["matched"] == 1


def test_shipped_tables_are_curated_at_the_promised_size():
    lay_terms = load_lay_terms()
    assert sum(len(entries) for entries in lay_terms.terms.values()) >= 60
    assert len(lay_terms.brands) >= 40
    for entries in lay_terms.terms.values():
        for term in entries:
            assert all(v == v.lower().strip() for v in term.values), term
    assert {"statins", "beta blockers", "ace inhibitors", "loop diuretics"} <= set(lay_terms.classes)
    assert all(b.drug_class is None or b.drug_class in lay_terms.classes for b in lay_terms.brands)
