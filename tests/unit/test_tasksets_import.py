"""Task sets end to end on a tiny build (a manifest and three small SQLite databases, no real build): import with
the reproduction report, the atomic write, the manifest and `tasks list`, loading for the evaluation, the results'
`taskset` column and metric table, prediction files, and the command line's exit codes."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ehrbench.errors import ConfigError, MissingInputError
from ehrbench.evaluation.results import ResultStore
from ehrbench.evaluation.tasks import load_tasks, taskset_tasks
from ehrbench.evaluation.taskset_metrics import metric_table_by_taskset
from ehrbench.layout import DataLayout
from ehrbench.settings import EvaluationParameters
from ehrbench.tasksets import predictions as predictions_module
from ehrbench.tasksets import store as store_module
from ehrbench.tasksets.importer import plan_import, run_import
from ehrbench.tasksets.predictions import read_predictions, score_predictions
from ehrbench.tasksets.store import TASKS_SCHEMA, list_tasksets, read_manifest, write_taskset

DATABASES = {
    "ehrsql2024/mimic_iv": ["create table prescriptions (drug text, route text, dose real)",
                            "insert into prescriptions values ('amoxicillin', 'po', 500.0), ('heparin', 'iv', 1.23456),"
                            " ('heparin', 'sc', 2.0)"],
    "ehrsql_eicu/eicu": ["create table lab (labid integer, labname text)", "create table cost (eventid int, cost real)",
                         "insert into lab values (1, 'hct'), (2, 'fe')", "insert into cost values (1, 9.71), (2, 3.5)"],
    "renamed/mimic_iv": ["create table medicationorders (patientid int, medicationname text)",
                         "insert into medicationorders values (1, 'lipitor'), (2, 'lipitor'), (2, 'aspirin')"],
}
LABELS = {"q1": "SELECT DISTINCT prescriptions.route FROM prescriptions WHERE prescriptions.drug = 'heparin'",
          "q2": "SELECT MAX(dose) FROM prescriptions WHERE drug = 'heparin' AND '2100-12-31 23:59:00' = current_time",
          "q3": "null"}
ANSWERS = {"q1": "[['iv'], ['sc']]", "q2": "[['9.0']]", "q3": "null"}  # q2's published answer is not reproduced


def _build(data: Path, build_id: str = "B1", preset: str = "ehrsql2022") -> Path:
    folder = data / "benchmarks" / build_id
    for key, statements in DATABASES.items():
        path = folder / "db" / f"{key}.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(path) as con:
            for statement in statements:
                con.execute(statement)
        con.close()
    (folder / "manifest.json").write_text(json.dumps({
        "build_id": build_id, "parameters": {"eicu_preset": preset},
        "sources": {"mimic_iv": {"edition": "demo"}, "eicu": {"edition": "demo"}},
        "profile_vars": {"ehrsql2024": {"current_time": "2100-12-31 23:59:00"},
                         "ehrsql_eicu": {"current_time": "2105-12-31 23:59:00"}}}))
    latest = data / "benchmarks" / "latest"
    latest.unlink(missing_ok=True)
    latest.symlink_to(build_id)
    return folder


def _split(folder: Path, labels=None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    questions = [{"id": key, "question": f"question {key}?"} for key in (labels or LABELS)]
    (folder / "data.json").write_text(json.dumps({"version": "test", "data": questions}))
    (folder / "label.json").write_text(json.dumps(labels or LABELS))
    (folder / "answer.json").write_text(json.dumps({key: ANSWERS.get(key, "[]") for key in (labels or LABELS)}))
    return folder


@pytest.fixture
def data(tmp_path) -> DataLayout:
    _build(tmp_path / "data")
    return DataLayout(root=tmp_path / "data")


@pytest.fixture
def imported(data, tmp_path):
    """The split imported as task set `valid` (its manifest)."""
    return run_import(plan_import(data, "ehrsql2024", [_split(tmp_path / "valid")], "valid"))


def test_an_import_executes_every_gold_sql_and_reports_what_it_reproduced(data, imported, tmp_path):
    manifest = imported
    assert (manifest.name, manifest.format, manifest.protocol, manifest.suite) == (
        "valid", "ehrsql2024", "ehrsql2024", "ehrsql")
    assert (manifest.tasks, manifest.answerable, manifest.targets) == (3, 2, ["ehrsql2024/mimic_iv"])
    assert manifest.build.build_id == "B1" and manifest.build.eicu_preset == "ehrsql2022"
    assert manifest.current_time == {"ehrsql2024/mimic_iv": "2100-12-31 23:59:00"}
    assert [Path(s.path).name for s in manifest.sources] == ["answer.json", "data.json", "label.json"]
    assert all(len(s.sha256) == 64 and s.bytes > 0 for s in manifest.sources)
    report = manifest.reproduction
    assert (report.executed, report.compared, report.reproduced, report.share) == (2, 2, 1, 0.5)
    assert [(m.task_id, m.published, m.reproduced) for m in report.mismatches] == [("q2", "[['9.0']]", "[['2.0']]")]
    assert report.describe() == "1/2 published answers reproduced (50.0%)"
    layout = data.taskset("valid")
    assert sorted(p.name for p in layout.root.iterdir()) == ["manifest.json", "tasks.parquet"]
    assert read_manifest(layout) == manifest
    table = pq.read_table(layout.tasks)
    assert table.schema == TASKS_SCHEMA
    rows = {row["question_id"]: row for row in table.to_pylist()}
    assert (rows["q1"]["answer"], rows["q1"]["answer_text"], rows["q1"]["reproduced"]) == (
        '[["iv"], ["sc"]]', "[['iv'], ['sc']]", True)
    assert rows["q2"]["answer"] == "[[2.0]]" and rows["q2"]["reproduced"] is False
    assert (rows["q3"]["is_answerable"], rows["q3"]["answer"], rows["q3"]["gold_sql_sqlite"]) == (False, None, None)
    assert rows["q1"]["context"] == "Assume the current time is 2100-12-31 23:59:00."
    assert {row["taskset"] for row in rows.values()} == {"valid"} and rows["q1"]["target"] == "ehrsql2024/mimic_iv"


def test_a_gold_sql_that_fails_names_file_and_task_and_writes_nothing(data, tmp_path):
    split = _split(tmp_path / "bad", {**LABELS, "q4": "SELECT x FROM nope"})
    plan = plan_import(data, "ehrsql2024", [split], "bad")
    with pytest.raises(ConfigError) as raised:
        run_import(plan)
    database = data.root.resolve() / "benchmarks" / "B1" / "db" / "ehrsql2024" / "mimic_iv.sqlite"
    assert str(raised.value) == (f"{split.resolve()}/label.json: task q4: its gold SQL fails on {database} "
                                 "(OperationalError: no such table: nope)")
    assert not data.tasksets.exists() or list(data.tasksets.iterdir()) == []


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"format_name": "ehrsql2024", "name": "a/b"}, "--name: expected 1-100 letters, digits, '.', '_' or '-', not "
                                                  "starting with '.' and without '..', got 'a/b'"),
    ({"format_name": "ehrsql2024", "name": "valid"}, "--name: task set 'valid' exists ({data}/tasksets/valid); give "
                                                    "another --name or --replace"),
    ({"format_name": "ehrsql2024", "build": "B9"}, "--build: no build at {data}/benchmarks/B9; expected 'latest', a "
                                                  "build id or a build folder (list builds with 'ehrbench builds')"),
    ({"format_name": "ehrsql", "build": "B2"}, "--build: build B2 was made with --eicu-preset ehrchatqa; EHRSQL (2022) "
                                              "tasks need its eICU database as EHRSQL built it: build with "
                                              "--eicu-preset ehrsql2022"),
    ({"format_name": "sql"}, "--format: unknown format 'sql'; expected one of ehrsql2024, ehrsql, ehrchatqa, "
                                 "fhir-agentbench, ehrnoteqa"),
])
def test_an_import_is_refused_before_anything_runs(data, imported, tmp_path, arguments, expected):
    _build(data.root, "B2", preset="ehrchatqa")
    eicu = tmp_path / "eicu.json"
    eicu.write_text(json.dumps([{"id": "e1", "question": "q?", "query": "select 1"}]))
    paths = [eicu] if arguments["format_name"] == "ehrsql" else [tmp_path / "valid"]
    with pytest.raises(ConfigError) as raised:
        plan_import(data, paths=paths, **{"name": "other", **arguments})
    assert str(raised.value) == expected.format(data=data.root)


def test_the_same_published_id_twice_is_refused(data, tmp_path):
    items = [{"id": "e1", "question": "q?", "query": "select 1"}, {"id": "e1", "question": "q2?", "query": "null"}]
    (tmp_path / "a.json").write_text(json.dumps(items))
    with pytest.raises(ConfigError) as raised:
        plan_import(data, "ehrsql", [tmp_path / "a.json"])
    assert str(raised.value) == f"{tmp_path}/a.json: task e1: appears twice; expected every task id once"


def test_ehrsql_answers_are_recomputed_on_the_demo_and_ehrchatqa_words_are_reproduced(data, tmp_path):
    (tmp_path / "valid.json").write_text(json.dumps([
        {"id": "e1", "db_id": "eicu", "question": "Cost of HCT?", "is_impossible": False, "answer": "['(1.0,)']",
         "query": "select distinct cost.cost from cost where cost.eventid in (select lab.labid from lab where "
                  "lab.labname = 'HCT')"},
        {"id": "e2", "db_id": "eicu", "question": "Anticancer protocol?", "query": "null", "is_impossible": True}]))
    eicu = run_import(plan_import(data, "ehrsql", [tmp_path / "valid.json"]))
    assert (eicu.name, eicu.requires, eicu.reproduction.executed, eicu.reproduction.compared) == (
        "ehrsql-valid", {"eicu_preset": "ehrsql2022"}, 1, 0)
    assert eicu.reproduction.note == ("EHRSQL (2022) was built on the full eICU; on the eICU demo its answers are "
                                      "recomputed")
    (row, _) = pq.read_table(data.taskset("ehrsql-valid").tasks).to_pylist()
    assert row["answer"] == "[[9.71]]" and row["current_time"] == "2105-12-31 23:59:00"  # 'HCT' lower-cased
    (tmp_path / "adapt.json").write_text(json.dumps([
        {"task_id": "0", "task_type": "adapt", "db_id": "mimic_iv_star", "instruction": "Lipitor patients, in words.",
         "gold_sql": "SELECT COUNT(DISTINCT patientid) FROM medicationorders WHERE medicationname = 'lipitor'",
         "gold_answer": [["two"]]}]))
    chatqa = run_import(plan_import(data, "ehrchatqa", [tmp_path / "adapt.json"], "chat"))
    assert (chatqa.suite, chatqa.targets, chatqa.reproduction.describe()) == (
        "chatqa", ["renamed/mimic_iv"], "1/1 published answers reproduced (100.0%)")


def test_a_task_set_is_written_whole_or_not_at_all(data, imported, monkeypatch):
    layout = data.taskset("valid")
    before = layout.tasks.read_bytes()
    manifest = imported.model_copy(update={"tasks": 1})

    def broken(*_args, **_kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(store_module.pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        write_taskset(data.taskset("other"), manifest, [{"question_id": "x"}])
    with pytest.raises(OSError, match="disk full"):
        write_taskset(layout, manifest, [{"question_id": "x"}], replace=True)
    assert sorted(p.name for p in data.tasksets.iterdir()) == ["valid"]  # no staging folder left, no "other"
    assert layout.tasks.read_bytes() == before and read_manifest(layout).tasks == 3
    monkeypatch.undo()
    with pytest.raises(ConfigError, match=r"^task set 'valid' exists .*; give another --name or --replace$"):
        write_taskset(layout, manifest, [{"question_id": "x"}])
    write_taskset(layout, manifest, [{"question_id": "x"}], replace=True)
    assert read_manifest(layout).tasks == 1 and pq.read_table(layout.tasks).num_rows == 1
    assert sorted(p.name for p in data.tasksets.iterdir()) == ["valid"]


def test_list_shows_every_task_set_and_which_cannot_be_read(data, imported):
    (data.tasksets / "broken").mkdir()
    (data.tasksets / ".half.1234abcd.tmp").mkdir()  # an import in progress: not a task set yet
    found = list_tasksets(data)
    assert [layout.name for layout, _ in found] == ["broken", "valid"]
    assert found[1][1] == imported
    assert found[0][1] == (f"task set 'broken': no {data.tasksets}/broken/manifest.json; import it with 'ehrbench "
                           "tasks import' (list them with 'ehrbench tasks list')")


def test_a_task_set_loads_as_tasks_of_its_suite_on_its_build(data, imported):
    build = data.build_folder("latest").resolve()
    tasks = taskset_tasks(data.taskset("valid"), build)
    q1 = tasks[0]
    assert (q1.view.suite, q1.view.task_id, q1.view.db, q1.view.instruction) == (
        "ehrsql", "valid/q1", "mimic_iv", "question q1?")
    assert q1.view.database == build / "db" / "ehrsql2024" / "mimic_iv.sqlite"
    assert q1.view.context == "Assume the current time is 2100-12-31 23:59:00."
    assert (q1.gold.protocol, q1.gold.answer_text, q1.gold.answer_rows) == (
        "ehrsql2024", "[['iv'], ['sc']]", (("iv",), ("sc",)))
    assert q1.gold.sql == LABELS["q1"] and not tasks[2].gold.is_answerable and tasks[2].gold.answer_rows is None
    both = load_tasks(build, (), limit=2, seed=0, tasksets=(data.taskset("valid"),))
    assert len(both) == 2 and all(t.view.task_id.startswith("valid/") for t in both)
    assert both == load_tasks(build, (), limit=2, seed=0, tasksets=(data.taskset("valid"),))  # the same sample
    _build(data.root, "B2")
    with pytest.raises(ConfigError) as raised:
        taskset_tasks(data.taskset("valid"), data.build_folder("B2"))
    assert str(raised.value) == ("task set 'valid' was imported against build B1, not B2 (its gold answers are that "
                                 "build's): evaluate it with --build B1, or import it for this build with 'ehrbench "
                                 "tasks import --build B2 --name <new name>'")
    with pytest.raises(MissingInputError, match=r"^task set 'gone': no .*manifest.json; import it with"):
        taskset_tasks(data.taskset("gone"), build)


def _row(agent: str, task: str, reward: float, suite: str = "ehrsql", answerable: bool = True) -> dict:
    return {"build_id": "B1", "suite": suite, "task_id": task, "trial": 0, "agent": agent, "status": "completed",
            "reward": reward, "correct": reward == 1.0, "is_answerable": answerable, "abstained": False}


def test_results_hold_the_task_set_and_the_metric_table_reports_it_apart(tmp_path):
    store = ResultStore(tmp_path / "results", "mixed")
    store.spill(_row("oracle", "valid/q9", 1.0))
    assert pq.read_table(next(store.pending.glob("*.parquet"))).column("taskset").to_pylist() == ["valid"]
    store.write([_row("oracle", "6c07a151", 0.0), _row("oracle", "valid/q1", 1.0), _row("oracle", "valid/q2", 1.0)])
    part = pq.read_table(store.parts()[0])
    assert part.column("taskset").to_pylist() == [None, "valid", "valid"]
    assert store.completed() == {("oracle", "ehrsql", "6c07a151", 0), ("oracle", "ehrsql", "valid/q1", 0),
                                 ("oracle", "ehrsql", "valid/q2", 0)}  # resume: one key for both kinds of task
    rows = metric_table_by_taskset(store.folder)
    assert [(r["agent"], r["suite"], r["taskset"], r["tasks"], r["RS(10)"]) for r in rows] == [
        ("oracle", "ehrsql", None, 1, -10.0), ("oracle", "ehrsql", "valid", 2, 1.0)]
    assert list(rows[1])[:3] == ["agent", "suite", "taskset"]
    plain = ResultStore(tmp_path / "results", "plain")
    plain.write([_row("oracle", "6c07a151", 1.0)])
    assert "taskset" not in metric_table_by_taskset(plain.folder)[0]  # runs without task sets: the table as before


def test_a_prediction_file_is_scored_by_the_protocols_scorer(data, imported, tmp_path, monkeypatch):
    path = tmp_path / "predictions.json"
    path.write_text(json.dumps({"q1": LABELS["q1"], "q2": "SELECT 1", "q3": "null"}))
    loaded = read_predictions(data.taskset("valid"), path)
    assert loaded.gold == LABELS and str(loaded.target) == "ehrsql2024/mimic_iv"
    calls = []

    def scorer(gold_items, predictions, execute, *, current_time):
        calls.append((gold_items, predictions, execute(gold_items["q1"]), current_time))
        return {"accuracy10": 0.0}

    with monkeypatch.context() as patched:
        patched.setattr(predictions_module, "_scorer", lambda protocol: scorer)
        assert score_predictions(loaded) == {"accuracy10": 0.0}
    assert calls == [(LABELS, json.loads(path.read_text()), [["iv"], ["sc"]], "2100-12-31 23:59:00")]
    pytest.importorskip("ehrbench.scoring.ehrsql2024")  # the scorer itself: gold as predictions scores 100
    path.write_text(json.dumps(LABELS))
    assert score_predictions(read_predictions(data.taskset("valid"), path))["accuracy10"] == 100.0
    path.write_text(json.dumps({"q1": LABELS["q1"]}))  # EHRSQL-2024's scorer wants every question id
    with pytest.raises(ConfigError, match=rf"^{path}: prediction ids do not match the gold ids"):
        score_predictions(read_predictions(data.taskset("valid"), path))


def test_a_protocol_without_its_scorer_says_so(monkeypatch):
    def missing(name):
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    monkeypatch.setattr(predictions_module.importlib, "import_module", missing)
    with pytest.raises(predictions_module.ScorerMissing) as raised:
        predictions_module._scorer("ehrsql2022")
    assert str(raised.value) == "no scorer for protocol ehrsql2022 (ehrbench.scoring.ehrsql2022 is not installed)"


@pytest.mark.parametrize(("content", "expected"), [
    ({"q7": "select 1"}, "{p}: task q7: not a task of task set 'valid'; expected predictions for its questions"),
    ({"q1": None}, "{p}: task q1: its prediction is null; expected SQL or \"null\""),
    (["select 1"], "{p}: holds a list; expected an object mapping question id to the predicted SQL or \"null\""),
])
def test_a_bad_prediction_file_is_refused_in_one_line(data, imported, tmp_path, content, expected):
    path = tmp_path / "predictions.json"
    path.write_text(json.dumps(content))
    with pytest.raises(ConfigError) as raised:
        read_predictions(data.taskset("valid"), path)
    assert str(raised.value) == expected.format(p=path)


def test_evaluation_parameters_take_task_sets_instead_of_suites():
    only = EvaluationParameters(agents=["oracle"], tasksets=["valid"])
    assert (only.chosen_suites(), only.tasksets) == ([], ["valid"])
    assert EvaluationParameters(agents=["oracle"]).chosen_suites() == ["ehrsql", "chatqa", "fhir", "dq", "noteqa",
                                                                       "meds_conversion", "event_modelling"]
    assert EvaluationParameters(agents=["oracle"], suites=["dq"], tasksets=["v"]).chosen_suites() == ["dq"]
    for names, message in ((["a/b"], "must be task set names"), (["v", "v"], "must name each task set once")):
        with pytest.raises(ValueError, match=message):
            EvaluationParameters(agents=["oracle"], tasksets=names)


def _cli(data: DataLayout, *args: str):
    import ehrbench.cli as cli

    environment = {k: None for k in os.environ if k.startswith(("PREFECT_", "EHRBENCH_"))}
    return CliRunner().invoke(cli.app, [*args, "--data-dir", str(data.root)], env=environment)


def test_the_commands_print_the_report_and_refuse_or_fail_in_one_line(data, tmp_path, monkeypatch):
    split = _split(tmp_path / "valid")
    result = _cli(data, "tasks", "import", "--format", "ehrsql2024", str(split))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[:2] == [
        "task set ehrsql2024-valid: 3 tasks (2 answerable), suite ehrsql, protocol ehrsql2024, build B1",
        "  1/2 published answers reproduced (50.0%)"]
    assert "  mismatch q2: published [['9.0']], reproduced [['2.0']]" in result.stderr.splitlines()
    assert "next: uv run ehrbench evaluate --taskset ehrsql2024-valid --agent oracle --agent abstain" in result.stdout
    listed = _cli(data, "tasks", "list")
    assert listed.exit_code == 0 and "ehrsql2024-valid" in listed.stdout and "1/2" in listed.stdout
    again = _cli(data, "tasks", "import", "--format", "ehrsql2024", str(split))
    assert again.exit_code == 2 and again.stderr.strip().startswith(
        "ehrbench: error: --name: task set 'ehrsql2024-valid' exists")
    failing = _cli(data, "tasks", "import", "--format", "ehrsql2024", "--name", "f",
                   str(_split(tmp_path / "f", {"q1": "SELECT nope"})))
    assert failing.exit_code == 1 and len(failing.stderr.strip().splitlines()) == 2  # the "importing" line + error
    assert "task q1: its gold SQL fails on" in failing.stderr and not data.taskset("f").root.exists()

    import ehrbench.cli as cli

    monkeypatch.setattr(cli, "use_prefect", lambda *a, **k: pytest.fail("the input was not refused"))
    unknown = _cli(data, "evaluate", "--taskset", "nope")
    assert unknown.exit_code == 2 and unknown.stderr.strip() == (
        f"ehrbench: error: --taskset: task set 'nope': no {data.tasksets}/nope/manifest.json; import it with "
        "'ehrbench tasks import' (list them with 'ehrbench tasks list')")
    _build(data.root, "B2")  # latest is another build now
    other = _cli(data, "evaluate", "--taskset", "ehrsql2024-valid")
    assert other.exit_code == 2 and other.stderr.strip() == (
        "ehrbench: error: --taskset: task set 'ehrsql2024-valid' was imported against build B1, not B2 (its gold "
        "answers are that build's); evaluate it with --build B1, or import it again with --build B2 and another "
        "--name")


def test_sql_from_elsewhere_only_reads_and_stops_at_its_time_limit(data):
    from ehrbench.tasksets.execution import QueryTimeout, SqliteDatabase

    path = data.build_folder("latest") / "db" / "ehrsql2024" / "mimic_iv.sqlite"
    with SqliteDatabase(path, timeout_s=0.2) as database:
        assert database.rows("select count(*) from prescriptions") == [[3]]
        for sql in (f"attach database '{path}.copy' as other", "delete from prescriptions", "pragma user_version = 3",
                    "select load_extension('evil')"):
            with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
                database.rows(sql)
        with pytest.raises(QueryTimeout, match=r"^ran longer than 0.2 s$"):
            database.rows("with recursive n(i) as (select 1 union all select i + 1 from n) select count(*) from n")
    assert not Path(f"{path}.copy").exists()


def test_score_refuses_a_task_set_name_that_is_no_folder_name(data):
    result = _cli(data, "tasks", "score", "--taskset", "../elsewhere", "predictions.json")
    assert result.exit_code == 2 and result.stderr.strip() == (
        "ehrbench: error: --taskset: expected 1-100 letters, digits, '.', '_' or '-', not starting with '.' and "
        "without '..', got '../elsewhere'")
