"""Format `fhir-agentbench`: FHIR-AgentBench's question CSV read (its numpy-printed answers, its id dicts), imported
as the gold with the share of gold ids the build's FHIR view holds, and loaded as fhir tasks on that view. A tiny
build: a manifest and a FHIR resources database of four resources."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest

from ehrbench.errors import ConfigError
from ehrbench.evaluation.tasks import taskset_tasks
from ehrbench.layout import DataLayout
from ehrbench.tasksets.fhir_agentbench import FhirAgentBenchFormat, answer_rows
from ehrbench.tasksets.importer import plan_import, run_import
from tests.conftest import SHARED_DATA

PUBLISHED = SHARED_DATA / "fhir-agentbench" / "questions_answers_fhir.csv"
COLUMNS = ["question_id", "question", "assumption", "patient_fhir_id", "true_answer", "true_fhir_ids", "template"]
ROWS = [
    ["a1", "Which drugs were prescribed iv drip to patient 10020944 first?", "", "p1",
     "[['Midazolam']\n ['Fentanyl Citrate']]", "{'MedicationRequest': ['m1', 'm2'], 'Patient': ['p1']}", "t1"],
    ["a2", "When was the respiratory rate of patient 10018081 first below 23.0 today?",
     "Assume the current time is 2133-12-31 23:59:00.", "p1", "[['2133-12-31 02:00:00']]",
     "{'Observation': ['o1', 'o-gone']}", "t2"],
    ["a3", "Was patient 10018081 given heparin?", "", "p1", "[]", "{}", ""],
]


def _csv(path: Path, rows=ROWS, columns=COLUMNS) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerows(rows)
    return path


@pytest.fixture
def data(tmp_path) -> DataLayout:
    """A build whose mimic_iv_on_fhir view has four resources (no Observation o-gone); its EHRSQL-aligned view has
    only the Patient (FHIR-AgentBench's tasks must not read it)."""
    folder = tmp_path / "data" / "benchmarks" / "B1"
    (folder / "fhir" / "mimic_iv_on_fhir").mkdir(parents=True)
    for path, rows in ((folder / "fhir" / "mimic_iv_on_fhir" / "resources.duckdb",
                        "('p1', 'Patient', 'p1', 'patients', '1', '{}'), "
                        "('m1', 'MedicationRequest', 'p1', 'prescriptions', '1', '{}'), "
                        "('m2', 'MedicationRequest', 'p1', 'prescriptions', '2', '{}'), "
                        "('o1', 'Observation', 'p1', 'chartevents', '1', '{}')"),
                       (folder / "fhir" / "resources.duckdb", "('p1', 'Patient', 'p1', 'patients', '1', '{}')")):
        with duckdb.connect(str(path)) as con:
            con.execute("create table resources (id varchar, resource_type varchar, patient_id varchar, "
                        "source_table varchar, source_key varchar, resource json)")
            con.execute(f"insert into resources values {rows}")
    (folder / "manifest.json").write_text(json.dumps({"build_id": "B1", "parameters": {}}))
    (tmp_path / "data" / "benchmarks" / "latest").symlink_to("B1")
    return DataLayout(root=tmp_path / "data")


@pytest.mark.parametrize("rows", [
    [["Midazolam"], ["Fentanyl Citrate"], ["0.9% Sodium Chloride"]],  # many rows: one per line, no commas
    [[1]], [[7.5]], [[-2.25, "x"]], [["it's", 3]],  # numbers, a negative one, quotes inside text
    [["2133-12-31 02:00:00", 140.0, 3]], [["a", None]], [],
])
def test_answer_rows_read_what_the_published_dataset_script_printed(rows):
    """create_question_answer_dataset.py writes `str(result.values)`: the numpy array of the query's DataFrame."""
    printed = str(pd.DataFrame(rows).values) if rows else "[]"
    assert answer_rows(printed) == rows


def test_a_missing_number_prints_nan_and_reads_as_none():
    assert str(pd.DataFrame([["b", float("nan")]]).values) == "[['b' nan]]"
    assert answer_rows("[['b' nan]]") == [["b", None]]


@pytest.mark.parametrize("text", ["not rows", "['a']", "[[1]", "{'a': 1}", "[['a'] ...]"])
def test_text_that_is_no_list_of_rows_is_not_read(text):
    assert answer_rows(text) is None


def test_the_csv_reads_as_tasks_with_their_gold_ids_and_types(tmp_path):
    tasks = FhirAgentBenchFormat().read([_csv(tmp_path / "q.csv")])
    first, second, third = tasks
    assert (first.source_id, first.db, first.patient_fhir_id, first.context, first.template) == (
        "a1", "mimic_iv", "p1", None, "t1")
    assert first.answer_rows == (("Midazolam",), ("Fentanyl Citrate",))
    assert (first.fhir_ids, first.fhir_types) == (("m1", "m2", "p1"), ("MedicationRequest",) * 2 + ("Patient",))
    assert second.context == "Assume the current time is 2133-12-31 23:59:00."
    assert (third.answer_rows, third.fhir_ids, third.template) == ((), (), None)
    assert all(task.gold_sql is None and task.is_answerable for task in tasks)


@pytest.mark.parametrize("change, expected", [
    (lambda rows, cols: (rows, cols[:-2] + cols[-1:]), "no column(s) true_fhir_ids"),
    (lambda rows, cols: ([[*rows[0][:4], "[['a'", *rows[0][5:]]], cols), "task a1: true_answer is not a list of rows"),
    (lambda rows, cols: ([[*rows[0][:5], "['m1']", rows[0][6]]], cols), "task a1: true_fhir_ids is not a dict"),
    (lambda rows, cols: ([[*rows[0][:5], "{'Observation': [1]}", rows[0][6]]], cols),
     "task a1: true_fhir_ids is not a dict"),
    (lambda rows, cols: ([[*rows[0][:5], "{'Observation': ['o1'", rows[0][6]]], cols),
     "task a1: true_fhir_ids is not a Python literal"),
    (lambda rows, cols: ([["a1", "", *rows[0][2:]]], cols), "task a1: empty question"),
    (lambda rows, cols: ([["", *rows[0][1:]]], cols), "line 2: no question_id"),
])
def test_a_bad_file_is_refused_naming_the_file_and_the_task(tmp_path, change, expected):
    rows, columns = change([list(row) for row in ROWS], list(COLUMNS))
    path = _csv(tmp_path / "q.csv", rows, columns)
    with pytest.raises(ConfigError) as raised:
        FhirAgentBenchFormat().read([path])
    assert str(raised.value).startswith(f"{path}: ") and expected in str(raised.value)


def test_an_import_keeps_the_published_gold_and_reports_the_ids_the_fhir_view_holds(data, tmp_path):
    plan = plan_import(data, "fhir-agentbench", [_csv(tmp_path / "q.csv")])
    assert plan.layout.name == "fhir-agentbench" and not plan.warnings  # the view is the data the paper used
    manifest = run_import(plan)
    report = manifest.reproduction
    assert (manifest.targets, manifest.suite, manifest.protocol, report.executed) == (
        ["fhir/mimic_iv_on_fhir"], "fhir", "fhir_agentbench", 0)
    # distinct gold ids by type: MedicationRequest m1, m2 (both held), Observation o1 (held) and o-gone, Patient p1
    assert {kind: (c.published, c.found) for kind, c in report.fhir_ids.items()} == {
        "MedicationRequest": (2, 2), "Observation": (2, 1), "Patient": (1, 1)}
    assert report.describe_fhir_ids() == ("gold FHIR ids in the build's FHIR view: 4/5 (80.0%); MedicationRequest "
                                          "2/2, Observation 1/2, Patient 1/1")
    rows = {row["question_id"]: row for row in pq.read_table(data.taskset("fhir-agentbench").tasks).to_pylist()}
    # the gold answer string as EHRSQL-2024's answer.json writes rows: cells as text, rows sorted
    assert rows["a1"]["answer_text"] == "[['Fentanyl Citrate'], ['Midazolam']]"
    assert rows["a1"]["published_answer"] == "[['Midazolam']\n ['Fentanyl Citrate']]"
    assert (rows["a3"]["answer_text"], rows["a3"]["empty_answer"]) == ("[]", True)
    assert json.loads(rows["a1"]["extra"]) == {"patient_fhir_id": "p1",
                                               "fhir_types": ["MedicationRequest", "MedicationRequest", "Patient"]}


def test_ids_a_format_gives_without_their_types_are_counted_as_one_group(data, tmp_path, monkeypatch):
    from dataclasses import replace

    from ehrbench.tasksets import registry

    class Untyped(FhirAgentBenchFormat):
        name = "untyped"

        def read(self, paths):
            return [replace(task, fhir_types=()) for task in super().read(paths)]

    monkeypatch.setitem(registry.FORMATS, "untyped", Untyped())
    manifest = run_import(plan_import(data, "untyped", [_csv(tmp_path / "q.csv")], "untyped"))
    assert {kind: (c.published, c.found) for kind, c in manifest.reproduction.fhir_ids.items()} == {
        "any type": (5, 4)}


def test_its_tasks_run_on_the_fhir_view_about_their_patient(data, tmp_path):
    run_import(plan_import(data, "fhir-agentbench", [_csv(tmp_path / "q.csv")]))
    tasks = {task.view.task_id: task for task in taskset_tasks(data.taskset("fhir-agentbench"), data.latest)}
    view, gold = tasks["fhir-agentbench/a2"].view, tasks["fhir-agentbench/a2"].gold
    assert (view.suite, view.database, view.patient_fhir_id, view.protocol) == ("fhir", None, "p1", "fhir_agentbench")
    assert view.fhir_resources == data.latest / "fhir" / "mimic_iv_on_fhir" / "resources.duckdb"
    assert view.context == "Assume the current time is 2133-12-31 23:59:00."
    assert (gold.fhir_ids, gold.answer_text, gold.sql) == (("o-gone", "o1"), "[['2133-12-31 02:00:00']]", None)


def test_a_build_without_the_mimic_iv_on_fhir_view_is_refused(data, tmp_path):
    """A build made before the view has only the EHRSQL-aligned one: the tasks' gold is not on it."""
    (data.latest / "fhir" / "mimic_iv_on_fhir" / "resources.duckdb").unlink()
    with pytest.raises(ConfigError, match="has no mimic_iv_on_fhir FHIR view .* rebuild, then import"):
        plan_import(data, "fhir-agentbench", [_csv(tmp_path / "q.csv")])


def test_the_published_file_reads_whole():
    if not PUBLISHED.is_file():
        pytest.skip(f"FHIR-AgentBench's question file not found at {PUBLISHED}")
    tasks = FhirAgentBenchFormat().read([PUBLISHED])
    assert len(tasks) == len({task.source_id for task in tasks}) == 2931  # the paper's 2,931 questions
    assert sum(len(task.answer_rows) > 1 for task in tasks) == 103  # printed over several lines, without commas
