"""The demo build's workspace tasks. MEDS conversion (docs/benchmarks.md#meds-conversion-tasks): the standard event
configuration, run by ehrbench.meds.convert over the raw demo files, gives exactly the build's dbt MEDS export (the
two implementations of the MEDS-for-MIMIC-IV mapping agree on every event and column). Event modelling
(docs/benchmarks.md#event-modelling-tasks): no test patient's event after its prediction time, disjoint subjects, and
the baseline's AUROC reproduced from the workspace's own files. For both, the tasks recorded in the manifest are the
build's, and through the harness the oracle passes every task and abstain fails every one."""

from __future__ import annotations

import json

import duckdb
import pyarrow.parquet as pq
import pytest
import yaml

from ehrbench.agents.baselines import AbstainAgent, OracleAgent
from ehrbench.evaluation.tasks import load_tasks
from ehrbench.evaluation.trial import run_trial
from ehrbench.layout import BuildLayout
from ehrbench.meds.conversion_tasks import DEFAULT_EVENT_CONFIG
from ehrbench.meds.convert import convert, csv_relation
from ehrbench.meds.event_config import EVENT_COLUMNS, load_event_config
from ehrbench.meds.modelling_baseline import train_and_score
from ehrbench.meds.modelling_tasks import TARGETS, aces_config, extract_labels, write_predicate_events

pytestmark = pytest.mark.integration


def test_the_standard_configuration_gives_exactly_the_builds_dbt_export(demo, mimic_demo_dir):
    converted = convert(load_event_config(DEFAULT_EVENT_CONFIG), csv_relation(mimic_demo_dir), columns=EVENT_COLUMNS)
    with duckdb.connect() as con:
        con.register("converted", converted)
        con.execute(f"create view exported as select {', '.join(EVENT_COLUMNS)} from "
                    f"read_parquet('{BuildLayout(demo).meds('raw')}/data/*.parquet')")
        exported = con.execute("select count(*) from exported").fetchone()[0]
        only = con.execute("select (select count(*) from (select * from converted except all select * from exported)),"
                           " (select count(*) from (select * from exported except all select * from converted))"
                           ).fetchone()
    assert converted.num_rows == exported > 1_000_000
    assert only == (0, 0)


def test_the_manifest_records_the_tasks_the_build_holds(demo):
    manifest = json.loads(BuildLayout(demo).manifest.read_text())
    recorded = {t["task_id"]: t for t in manifest["meds"]["conversion_tasks"]}
    tasks = BuildLayout(demo).workspace_tasks_of("meds_conversion")
    assert sorted(recorded) == [t.task_id for t in tasks] and len(tasks) == 4
    for task in tasks:
        gold = json.loads(task.task_json.read_text())
        assert recorded[task.task_id]["content_sha256"] == gold["expected"]["content_sha256"]
        assert gold["seed"] == manifest["parameters"]["seed"]
        assert pq.read_metadata(task.gold / "events.parquet").num_rows == gold["expected"]["events"] > 0
        assert not (task.workspace / "gold").exists()


def test_event_modelling_tasks_hold_no_future_of_a_test_patient_and_reproduce_their_baseline(demo):
    manifest = json.loads(BuildLayout(demo).manifest.read_text())
    recorded = {t["task_id"]: t for t in manifest["meds"]["modelling_tasks"]}
    tasks = BuildLayout(demo).workspace_tasks_of("event_modelling")
    assert sorted(recorded) == [t.task_id for t in tasks] and len(tasks) == 3
    for task in tasks:
        workspace, gold = task.workspace, json.loads(task.task_json.read_text())
        train_labels = pq.read_table(workspace / "labels" / "train.parquet")
        test_rows = pq.read_table(workspace / "labels" / "test.parquet")
        assert test_rows.column_names == ["subject_id", "prediction_time"]  # no label beside the agent
        with duckdb.connect() as con:
            late = con.execute(
                f"select count(*) from read_parquet('{workspace}/data/test/*.parquet') e join read_parquet("
                f"'{workspace}/labels/test.parquet') t using (subject_id) where e.time > t.prediction_time").fetchone()
            shared = con.execute(
                f"select count(*) from (select distinct subject_id from read_parquet('{workspace}/data/train/"
                f"*.parquet') intersect select subject_id from read_parquet('{workspace}/labels/test.parquet'))"
            ).fetchone()
        assert late == (0,) and shared == (0,)
        assert recorded[task.task_id]["baseline_auroc"] == gold["baseline"]["auroc"]
        test_labels = pq.read_table(task.gold / "test_labels.parquet")
        again = train_and_score(pq.read_table(workspace / "data" / "train" / "0.parquet"), train_labels,
                                pq.read_table(workspace / "data" / "test" / "0.parquet"), test_labels, gold["seed"])
        assert again["auroc"] == gold["baseline"]["auroc"] and 0.0 < again["auroc"] <= 1.0
        assert 2 <= gold["test"]["positive"] < gold["test"]["subjects"] == test_rows.num_rows


def test_aces_labels_the_demo_the_same_from_the_predicate_events_as_from_every_event(demo, tmp_path):
    """The tasks give ACES only the events a predicate can match (ehrbench.meds.modelling_tasks); on the build's raw
    MEDS data every target's labels are those of all its events."""
    shards = f"{BuildLayout(demo).meds('raw') / 'data'}/*.parquet"
    every, predicate_events = tmp_path / "every.parquet", tmp_path / "predicate_events.parquet"
    with duckdb.connect() as con:
        con.execute(f"copy (select * from read_parquet('{shards}') order by subject_id, time nulls first) to '{every}'")
    write_predicate_events(shards, predicate_events)
    assert pq.read_metadata(predicate_events).num_rows < pq.read_metadata(every).num_rows / 20
    for target in TARGETS[:4]:
        config = tmp_path / f"{target.name}.yaml"
        config.write_text(yaml.safe_dump(aces_config(target)))
        labels = [sorted(tuple(r.values()) for r in extract_labels(config, path).to_pylist())
                  for path in (every, predicate_events)]
        assert labels[0] == labels[1] and any(positive for *_, positive in labels[0]), target.name


@pytest.mark.parametrize("suite", ["meds_conversion", "event_modelling"])
def test_through_the_harness_the_oracle_passes_every_task_and_abstain_fails_every_one(demo, tmp_path, suite):
    tasks = load_tasks(demo, (suite,))
    oracle = OracleAgent({(t.view.suite, t.view.task_id): t.gold for t in tasks})
    for task in tasks:
        passed = run_trial(oracle, task, 0, "b", tmp_path)
        assert (passed["status"], passed["reward"], passed["correct"]) == ("completed", 1.0, True), passed["error"]
        assert json.loads(passed["verifier_metrics"])["problem"] is None
        assert passed["workspace_path"].endswith(f"oracle/{suite}/{task.view.task_id}-0")
        failed = run_trial(AbstainAgent(), task, 0, "b", tmp_path)
        assert (failed["status"], failed["reward"], failed["correct"]) == ("completed", 0.0, False)
        assert json.loads(failed["verifier_metrics"])["problem"].startswith("no ")
