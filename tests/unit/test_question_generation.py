"""Question generation on a small hand-made database (DuckDB + its SQLite twin): seeded sampling, executed gold,
the kept share of empty answers, the unanswerable share, timeouts, and the FHIR suite's rows."""

import json
import os
import sqlite3
import time
from datetime import datetime

import duckdb
import pytest

from ehrbench.fhir.ground_truth import Grounding
from ehrbench.questions.generate import GenerationSettings, generate_questions
from ehrbench.questions.suites import fhir_questions, write_ehrsql2024_export
from ehrbench.questions.templates import Template

NOW = datetime(2100, 12, 31, 23, 59)
LABS = [  # subject_id, label, charttime, valuenum
    (1, "sodium", "2100-03-01 08:00:00", 140.0), (1, "sodium", "2100-12-30 08:00:00", 136.5),
    (1, "potassium", "2100-06-01 09:00:00", 4.1), (2, "sodium", "2100-11-02 10:00:00", 129.0),
    (2, "glucose", "2100-11-03 10:00:00", 250.0), (3, "glucose", "2100-01-05 07:00:00", 90.0),
]


@pytest.fixture()
def database(tmp_path):
    duck_path, lite_path = tmp_path / "db.duckdb", tmp_path / "db.sqlite"
    duck = duckdb.connect(str(duck_path))
    duck.execute("create table labevents (subject_id integer, label varchar, charttime timestamp, valuenum double)")
    duck.executemany("insert into labevents values (?, ?, ?, ?)", LABS)
    duck.close()
    lite = sqlite3.connect(lite_path)
    lite.execute("create table labevents (subject_id integer, label text, charttime text, valuenum real)")
    lite.executemany("insert into labevents values (?, ?, ?, ?)", LABS)
    lite.commit()
    lite.close()
    return duck_path, lite_path


def template(**overrides) -> Template:
    spec = dict(
        id="lab_max", category="labs",
        question="What was the {agg} {lab_name} value of patient {patient_id} {time}?",
        phrasings=["Give the {agg} {lab_name} value of patient {patient_id} {time}.",
                   "The {agg} {lab_name} of patient {patient_id} {time}?",
                   "Tell me the {agg} {lab_name} value of patient {patient_id} {time}."],
        operators=["agg"], time={"time": ["none", "absolute", "relative"]},
        values={"mimic_iv": "select subject_id as patient_id, label as lab_name, charttime as anchor_time "
                            "from labevents"},
        sql={"mimic_iv": "select {{ agg }}(labevents.valuenum) from labevents where labevents.subject_id = "
                         "{{ patient_id }} and labevents.label = {{ lab_name }} {{ time.on('labevents.charttime') }}"})
    spec.update(overrides)
    return Template.model_validate(spec)


UNANSWERABLE = Template.model_validate(dict(
    id="unanswerable_side_effects", category="unanswerable_side_effects", answerable=False,
    question="What are the side effects of the drug patient {patient_id} takes?",
    phrasings=["Which side effects does patient {patient_id}'s drug have?",
               "Side effects of the medication of patient {patient_id}?",
               "List the side effects of what patient {patient_id} is on."],
    values={"mimic_iv": "select distinct subject_id as patient_id from labevents"}))


def generate(database, templates, **settings):
    return generate_questions(templates, "mimic_iv", *database, NOW,
                              GenerationSettings(**{"unanswerable_share": None, **settings}))


def test_gold_answers_are_executed_and_agree_across_dialects(database):
    questions = generate(database, [template()], per_template=5)
    assert len(questions) == 5
    for q in questions:
        values = json.loads(q.slot_values)
        rows = [r for r in LABS if r[0] == values["patient_id"] and r[1] == values["lab_name"]]
        assert rows, "sampled values are a row of the data"
        assert q.execution_error is None and q.sqlite_error is None
        assert q.answer_text == q.sqlite_answer_text
        if json.loads(q.time_kinds)["time"] == "none":
            agg = {"average": lambda v: sum(v) / len(v), "maximum": max, "minimum": min}
            assert json.loads(q.answer) == [[agg[json.loads(q.slot_texts)["agg"]]([r[3] for r in rows])]]
        assert q.question.startswith(f"What was the {json.loads(q.slot_texts)['agg']} {values['lab_name']} value")


def test_the_same_seed_draws_the_same_questions_and_another_seed_others(database):
    first = [(q.question_id, q.gold_sql_duckdb) for q in generate(database, [template()], seed=7)]
    again = [(q.question_id, q.gold_sql_duckdb) for q in generate(database, [template()], seed=7)]
    other = [(q.question_id, q.gold_sql_duckdb) for q in generate(database, [template()], seed=8)]
    assert first == again
    assert first != other


def test_threads_do_not_change_the_questions(database):
    templates = [template(id=f"lab_{i}") for i in range(6)] + [UNANSWERABLE]
    one = [q.to_dict() | {"execution_s": 0} for q in generate(database, templates, workers=1, seed=5)]
    two = [q.to_dict() | {"execution_s": 0} for q in generate(database, templates, workers=2, seed=5)]
    assert one == two and len(one) == 6 * 5 + 3  # the unanswerable template has three patients to ask about


def test_a_gold_query_runs_on_the_cores_each_template_thread_leaves(database):
    """On 2 cores and 2 template threads, one thread per query: the order of an unordered answer's rows is then the
    same in every run (with two, 25 of the demo's 1,711 answers changed order between runs)."""
    from ehrbench.questions.generate import _Connections

    connections = _Connections(*database, workers=2)
    try:
        threads = connections.duckdb().execute("select current_setting('threads')").fetchone()[0]
    finally:
        connections.close()
    assert threads == max(1, (os.cpu_count() or 1) // 2)


def test_a_templates_draws_do_not_depend_on_the_other_templates(database):
    alone = generate(database, [template()], seed=3)
    with_another = generate(database, [template(id="lab_other"), template()], seed=3)
    assert [q.question_id for q in alone] == [q.question_id for q in with_another if q.template_id == "lab_max"]


def test_empty_answers_are_kept_up_to_their_share_and_labelled(database):
    never = template(sql={"mimic_iv": "select labevents.valuenum from labevents where labevents.subject_id = "
                                      "{{ patient_id }} and labevents.label = {{ lab_name }} and false"},
                     operators=[], question="What was the {lab_name} value of patient {patient_id} {time}?",
                     phrasings=["The {lab_name} value of patient {patient_id} {time}?"] * 3)
    questions = generate(database, [never], per_template=5, empty_share=0.4)
    assert len(questions) == 2  # 40 % of 5 may be empty; every draw is
    assert all(q.empty_answer and q.empty_by_design for q in questions)
    assert generate(database, [never], per_template=5, empty_share=0.0) == []


def test_sql_errors_and_timeouts_are_recorded_not_raised(database):
    broken = template(sql={"mimic_iv": "select nosuchcolumn from labevents where {{ patient_id }} = {{ lab_name }} "
                                       "{{ agg }} {{ time.on('charttime') }}"})
    (first, *_) = generate(database, [broken], per_template=1)
    assert "nosuchcolumn" in first.execution_error and first.answer is None
    slow = template(sql={"mimic_iv": "select count(*) from range(100000000) a, range(100000) b where "
                                     "{{ patient_id }} > 0 and {{ lab_name }} <> '' {{ time.on('a.range') }} "
                                     "and '{{ agg }}' <> ''"}, time={"time": ["none"]})
    (timed_out, *_) = generate(database, [slow], per_template=1, timeout_s=0.5)
    assert timed_out.execution_error.startswith("QueryTimeout")
    assert timed_out.execution_s < 5


def test_a_sqlite_gold_query_past_its_time_is_interrupted_and_the_connection_still_answers():
    from ehrbench.questions.generate import QueryTimeout, run_sqlite

    con = sqlite3.connect(":memory:", check_same_thread=False)
    endless = ("with recursive n(i) as (select 1 union all select i + 1 from n where i < 2000000000) "
               "select count(*) from n")  # minutes
    started = time.monotonic()
    with pytest.raises(QueryTimeout, match="longer than 0.3 s in SQLite"):
        run_sqlite(con, endless, timeout_s=0.3)
    assert time.monotonic() - started < 5
    with pytest.raises(sqlite3.OperationalError, match="no such table"):  # an error, not a timeout
        run_sqlite(con, "select * from nosuchtable", timeout_s=5)
    assert run_sqlite(con, "select 1 + 1", timeout_s=0.2) == [(2,)]
    # that query's deadline, cancelled as it returned, falls within the next query's second or so: it must not stop it
    assert run_sqlite(con, "with recursive n(i) as (select 1 union all select i + 1 from n where i < 2000000) "
                           "select count(*) from n", timeout_s=30) == [(2000000,)]


def test_unanswerable_questions_are_spread_to_their_share(database):
    questions = generate(database, [template(), UNANSWERABLE], per_template=4, unanswerable_share=0.2)
    answerable = [q for q in questions if q.is_answerable]
    unanswerable = [q for q in questions if not q.is_answerable]
    assert len(answerable) == 4 and len(unanswerable) == 1  # 20 % of 5
    assert unanswerable[0].gold_sql_duckdb is None and unanswerable[0].answer is None
    assert unanswerable[0].template_id == unanswerable[0].category


def test_fhir_rows_copy_grounded_single_patient_questions_with_context(database):
    questions = generate(database, [template(), UNANSWERABLE], per_template=3)
    grounded = questions[0]
    rows = fhir_questions(questions, [Grounding(grounded.question_id, "mapped", ["id-1", "id-2"],
                                                ["Observation", "Observation"], patient_scoped=True)])
    (row,) = rows
    assert row.suite == "fhir" and row.question_id != grounded.question_id
    assert row.fhir_ids == ["id-1", "id-2"]
    assert row.context == "Assume the current time is 2100-12-31 23:59:00."
    assert row.extra["ehrsql_question_id"] == grounded.question_id
    assert grounded.suite == "ehrsql" and grounded.fhir_ids is None  # the ehrsql row is left as it was


def test_ehrsql2024_export_scores_with_the_published_answer_format(database, tmp_path):
    from ehrbench.ehrsql.scoring import answers_match

    questions = generate(database, [template(), UNANSWERABLE], per_template=3)
    files = write_ehrsql2024_export(questions, tmp_path)
    data = json.loads((tmp_path / files["data"]).read_text())
    labels = json.loads((tmp_path / files["label"]).read_text())
    answers = json.loads((tmp_path / files["answer"]).read_text())
    assert [d["id"] for d in data["data"]] == [q.question_id for q in questions] == list(labels) == list(answers)
    lite = sqlite3.connect(database[1])
    for question_id, sql in labels.items():
        if sql == "null":
            assert answers[question_id] == "null"
        else:
            assert answers_match(lite.execute(sql).fetchall(), answers[question_id])
    with pytest.raises(FileExistsError):
        write_ehrsql2024_export(questions, tmp_path)
