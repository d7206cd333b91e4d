"""The readers of published task files (ehrbench.tasksets): each format's good files, and every kind of bad input as
its exact one-line message naming the file and the task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ehrbench.errors import ConfigError
from ehrbench.tasksets.ehrchatqa import normalised, number_from_words
from ehrbench.tasksets.model import ImportedTask, task_id, taskset_of
from ehrbench.tasksets.registry import FORMATS, format_named

EHRSQL2024 = format_named("ehrsql2024")
EHRSQL = format_named("ehrsql")
CHATQA = format_named("ehrchatqa")


def _write(path: Path, value) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return path


def _split(tmp_path: Path, data=None, labels=None, answers=None, annotated=None) -> Path:
    folder = tmp_path / "valid"
    _write(folder / "data.json", data if data is not None else {"version": "1", "data": [
        {"id": "q1", "question": "How is amoxicillin taken?"}, {"id": "q2", "question": "Who is the nurse?"}]})
    _write(folder / "label.json", labels if labels is not None else {
        "q1": "SELECT DISTINCT prescriptions.route FROM prescriptions WHERE drug = 'amoxicillin'", "q2": "null"})
    if answers is not None:
        _write(folder / "answer.json", answers)
    if annotated is not None:
        _write(folder / "annotated.json", annotated)
    return folder


def test_the_registry_names_each_format_with_its_protocol_suite_and_profile():
    assert {name: (f.protocol, f.suite, f.profile) for name, f in FORMATS.items()} == {
        "ehrsql2024": ("ehrsql2024", "ehrsql", "ehrsql2024"),
        "ehrsql": ("ehrsql2022", "ehrsql", "ehrsql_eicu"),
        "ehrchatqa": ("ehrchatqa", "chatqa", "renamed"),
        "ehrnoteqa": ("ehrnoteqa", "noteqa", "notes"),
        "fhir-agentbench": ("fhir_agentbench", "fhir", "fhir")}
    with pytest.raises(ConfigError, match=r"^--format: unknown format 'csv'; expected one of ehrsql2024, ehrsql, "):
        format_named("csv")


def test_a_task_set_task_id_holds_its_task_set():
    assert task_id("ehrsql2024-valid", "b9bf51c5") == "ehrsql2024-valid/b9bf51c5"
    assert taskset_of("ehrsql2024-valid/b9bf51c5") == "ehrsql2024-valid"
    assert taskset_of("6c07a15169c6b10673d73184") is None and taskset_of("combined_clues") is None


def test_ehrsql2024_reads_a_split_folder_with_labels_answers_and_templates(tmp_path):
    folder = _split(tmp_path, answers={"q1": "[['po']]", "q2": "null"},
                    annotated=[{"id": "q1", "question": "…", "template": "How is {drug_name} taken?", "val_dict": {}}])
    tasks = EHRSQL2024.read([folder])
    assert tasks == [
        ImportedTask("q1", "label.json", "How is amoxicillin taken?", "mimic_iv", True,
                     "SELECT DISTINCT prescriptions.route FROM prescriptions WHERE drug = 'amoxicillin'", "[['po']]",
                     template="How is {drug_name} taken?"),
        ImportedTask("q2", "label.json", "Who is the nurse?", "mimic_iv", False, None, None)]
    assert EHRSQL2024.default_name([folder]) == "ehrsql2024-valid"
    assert EHRSQL2024.read([_split(tmp_path / "b")])[0].published_answer is None  # answer.json is optional


def test_ehrsql2024_compares_as_the_published_answer_json():
    assert EHRSQL2024.answer_form([["po"], ["iv"], [1.23456]]) == "[['1.235'], ['iv'], ['po']]"
    assert EHRSQL2024.agrees([["iv"], ["po"]], "[['iv'], ['po']]")
    assert not EHRSQL2024.agrees([["iv"]], "[['iv'], ['po']]")
    assert EHRSQL2024.prepare_sql("SELECT current_time", "2100-12-31 23:59:00") == "SELECT '2100-12-31 23:59:00'"


@pytest.mark.parametrize(("files", "expected"), [
    ({"data": "{not json"}, "{d}/data.json: not valid JSON (Expecting property name enclosed in double quotes at "
                            "line 1 column 2); expected data.json: {{\"data\": [{{\"id\", \"question\"}}, …]}}"),
    ({"data": []}, "{d}/data.json: holds a list; expected data.json: {{\"data\": [{{\"id\", \"question\"}}, …]}}"),
    ({"data": {"data": [{"question": "q?"}]}},
     "{d}/data.json: item 0: no field 'id'; expected {{\"id\", \"question\"}}"),
    ({"data": {"data": [{"id": "q1"}]}}, "{d}/data.json: task q1: no field 'question'; expected the question text"),
    ({"data": {"data": [{"id": "q1", "question": 7}]}},
     "{d}/data.json: task q1: field 'question' is a number; expected the question text"),
    ({"labels": {}}, "{d}/label.json: task q1: no gold SQL; expected \"null\" or a query for every question of "
                     "data.json"),
    ({"labels": {"q1": ["select 1"], "q2": "null"}},
     "{d}/label.json: task q1: its gold SQL is a list; expected \"null\" or a query for every question of data.json"),
    ({"labels": []}, "{d}/label.json: holds a list; expected label.json: an object mapping every question id of "
                     "data.json to its SQL or \"null\""),
    ({"answers": {"q2": "null"}}, "{d}/answer.json: task q1: no answer; expected an answer string for every "
                                  "answerable question of data.json"),
    ({"answers": {"q1": [["po"]]}}, "{d}/answer.json: task q1: its answer is a list; expected the answer string, "
                                    "e.g. \"[['iv']]\""),
])
def test_ehrsql2024_bad_input_is_one_line_naming_the_file_and_task(tmp_path, files, expected):
    folder = _split(tmp_path, files.get("data"), files.get("labels"), files.get("answers"))
    with pytest.raises(ConfigError) as raised:
        EHRSQL2024.read([folder])
    assert str(raised.value) == expected.format(d=folder)


def test_ehrsql2024_wants_one_split_folder(tmp_path):
    with pytest.raises(ConfigError) as raised:
        EHRSQL2024.read([tmp_path / "nowhere"])
    assert str(raised.value) == (f"{tmp_path}/nowhere: not found; expected an EHRSQL-2024 split folder with data.json "
                                 "and label.json (answer.json optional)")
    with pytest.raises(ConfigError) as raised:
        EHRSQL2024.read([tmp_path, tmp_path])
    assert str(raised.value) == (f"{tmp_path}, {tmp_path}: expected one path, an EHRSQL-2024 split folder with "
                                 "data.json and label.json (answer.json optional)")
    with pytest.raises(ConfigError) as raised:
        EHRSQL2024.read([tmp_path])
    assert str(raised.value) == (f"{tmp_path}/data.json: not found; expected data.json: "
                                 "{\"data\": [{\"id\", \"question\"}, …]}")


EICU_ITEMS = [
    {"db_id": "eicu", "question": "What is the cost of HCT?", "template": "what is the cost of a hct lab test?",
     "query": "select distinct cost.cost from cost where cost.eventtype = 'lab' and cost.eventid in ( select "
              "lab.labid from lab where lab.labname = 'hct' )", "q_tag": "what is the cost of a {lab_name} lab test?",
     "is_impossible": False, "split": "valid", "id": "4b389eb66fa4290cbc998c75"},
    {"db_id": "eicu", "question": "What is the protocol for anticancer drugs?", "template": "anticancer drug",
     "query": "null", "is_impossible": True, "split": "valid", "id": "f773a270beb992090105a7b1"},
]


def test_ehrsql_reads_eicu_question_files(tmp_path):
    path = _write(tmp_path / "valid.json", EICU_ITEMS)
    hct, anticancer = EHRSQL.read([path])
    assert (hct.source_id, hct.db, hct.is_answerable, hct.template, hct.published_answer) == (
        "4b389eb66fa4290cbc998c75", "eicu", True, "what is the cost of a {lab_name} lab test?", None)
    assert hct.gold_sql == EICU_ITEMS[0]["query"] and hct.source_file == "valid.json"
    assert (anticancer.is_answerable, anticancer.gold_sql, anticancer.template) == (False, None, "anticancer drug")
    assert EHRSQL.default_name([path]) == "ehrsql-valid" and EHRSQL.requires() == {"eicu_preset": "ehrsql2022"}
    answered = _write(tmp_path / "answered.json", [{**EICU_ITEMS[0], "answer": [[9.71], [3]]}])
    assert EHRSQL.read([answered])[0].published_answer == "['(3,)', '(9.71,)']"  # the scorer's result text


def test_ehrsql_prepares_and_compares_as_ehrsqls_scorer():
    sql = "SELECT x FROM vitalperiodic WHERE heartrate > heart_rate_lower AND heartrate < heart_rate_upper " \
          "AND t <= datetime(current_time,'-1 year') AND strftime('%y', t) = '2105'"
    assert EHRSQL.prepare_sql(sql, None) == (
        "select x from vitalperiodic where heartrate > 60.0 and heartrate < 100.0 and t <= "
        "datetime('2105-12-31 23:59:00','-1 year') and strftime('%Y', t) = '2105'")
    assert EHRSQL.answer_form([[2], [1]]) == "['(1,)', '(2,)']"


@pytest.mark.parametrize(("items", "expected"), [
    ("[", "{p}: not valid JSON (Expecting value at line 1 column 2); expected an EHRSQL question file: a JSON list "
          "of {{id, db_id, question, query, is_impossible, …}}"),
    ({"data": []}, "{p}: holds an object; expected an EHRSQL question file: a JSON list of {{id, db_id, question, "
                   "query, is_impossible, …}}"),
    (["x"], "{p}: item 0 is text; expected an EHRSQL question file: a JSON list of {{id, db_id, question, query, "
            "is_impossible, …}}"),
    ([{**EICU_ITEMS[0], "db_id": "mimic_iii"}],
     "{p}: task 4b389eb66fa4290cbc998c75: db_id 'mimic_iii'; expected 'eicu' (ehrbench builds EHRSQL's eICU database, "
     "not its MIMIC-III one)"),
    ([{k: v for k, v in EICU_ITEMS[0].items() if k != "query"}],
     "{p}: task 4b389eb66fa4290cbc998c75: no field 'query'; expected its gold SQL, or \"null\" when unanswerable"),
    ([{**EICU_ITEMS[1], "is_impossible": False}], "{p}: task f773a270beb992090105a7b1: is_impossible is false but "
                                                  "its query is null; expected them to agree"),
    ([{**EICU_ITEMS[0], "answer": {"a": 1}}], "{p}: task 4b389eb66fa4290cbc998c75: answer is an object; expected "
                                              "the scorer's answer string or rows ([[\"value\"]])"),
])
def test_ehrsql_bad_input_is_one_line_naming_the_file_and_task(tmp_path, items, expected):
    path = _write(tmp_path / "valid.json", items)
    with pytest.raises(ConfigError) as raised:
        EHRSQL.read([path])
    assert str(raised.value) == expected.format(p=path)


CHATQA_ITEMS = [
    {"task_id": "0", "task_type": "adapt", "db_id": "mimic_iv_star", "instruction": "Count lipitor patients in words.",
     "gold_sql": "SELECT COUNT(DISTINCT patientid) FROM medicationorders WHERE medicationname = 'lipitor'",
     "gold_answer": [["nineteen"]]},
    {"task_id": "0", "task_type": "incre", "db_id": "eicu_star", "instruction": "The cost of a Cl lab test.",
     "gold_sql": "SELECT DISTINCT cost.cost_amount FROM cost", "gold_answer": [[9.71]]},
]


def test_ehrchatqa_reads_json_lists_and_json_lines_and_keys_tasks_as_its_metric_does(tmp_path):
    listed = _write(tmp_path / "mimic_iv_adapt.json", CHATQA_ITEMS[:1])
    lines = _write(tmp_path / "eval_incre.jsonl", "\n".join(json.dumps(i) for i in CHATQA_ITEMS[1:]) + "\n")
    adapt, incre = CHATQA.read([listed, lines])
    assert (adapt.source_id, adapt.db, adapt.task_type, adapt.published_answer) == (
        "mimic_iv_star-adapt-0", "mimic_iv", "adapt", '[["nineteen"]]')
    assert (incre.source_id, incre.db, incre.question, incre.source_file) == (
        "eicu_star-incre-0", "eicu", "The cost of a Cl lab test.", "eval_incre.jsonl")
    assert [str(CHATQA.target(t)) for t in (adapt, incre)] == ["renamed/mimic_iv", "renamed/eicu"]
    assert CHATQA.default_name([listed, lines]) == "ehrchatqa-mimic_iv_adapt-and-1-more"


def test_ehrchatqa_compares_answers_as_its_environment_with_number_words():
    assert [number_from_words(w) for w in ("three", "twenty-eight", "two hundred and forty-seven", "one thousand",
                                           "iv", "")] == [3, 28, 247, 1000, None, None]
    assert CHATQA.agrees([[19]], '[["nineteen"]]') and CHATQA.agrees([[72.66666]], "[[72.6667]]")
    assert CHATQA.agrees([["Unspecified Essential Hypertension "], [2]],
                         '[[2], ["unspecified essential hypertension"]]')
    assert not CHATQA.agrees([[18]], '[["nineteen"]]') and not CHATQA.agrees([[1]], "not json")
    assert normalised([[1.0], ["6.51"], [None]]) == [["1"], ["6.51"], ["None"]]


@pytest.mark.parametrize(("item", "expected"), [
    ({"task_type": "adapt"}, "{p}: item 0: no field 'task_id'; expected an EHR-ChatQA task file: a JSON list of "
                             "{{task_id, task_type, db_id, instruction, gold_sql, gold_answer}}"),
    ({**CHATQA_ITEMS[0], "task_type": "chat"}, "{p}: task 0: task_type 'chat'; expected incre or adapt"),
    ({**CHATQA_ITEMS[0], "db_id": "mimic_iv"}, "{p}: task 0: db_id 'mimic_iv'; expected mimic_iv_star or eicu_star"),
    ({k: v for k, v in CHATQA_ITEMS[0].items() if k != "gold_sql"},
     "{p}: task mimic_iv_star-adapt-0: no field 'gold_sql'; expected the gold SQL (SQLite)"),
    ({**CHATQA_ITEMS[0], "gold_answer": "nineteen"},
     "{p}: task mimic_iv_star-adapt-0: field 'gold_answer' is text; expected the gold answer as a list of rows"),
])
def test_ehrchatqa_bad_input_is_one_line_naming_the_file_and_task(tmp_path, item, expected):
    path = _write(tmp_path / "tasks.json", [item])
    with pytest.raises(ConfigError) as raised:
        CHATQA.read([path])
    assert str(raised.value) == expected.format(p=path)


def test_unparsable_json_lines_report_the_whole_documents_error(tmp_path):
    path = _write(tmp_path / "tasks.jsonl", '{"task_id": "0"}\n{oops\n')
    with pytest.raises(ConfigError) as raised:
        CHATQA.read([path])
    assert str(raised.value) == (f"{path}: not valid JSON (Extra data at line 2 column 1); expected an EHR-ChatQA "
                                 "task file: a JSON list of {task_id, task_type, db_id, instruction, gold_sql, "
                                 "gold_answer}")
