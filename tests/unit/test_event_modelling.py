"""Event-modelling tasks (ehrbench.meds.modelling_tasks, modelling_baseline, modelling_verify) on hand-made MEDS events:
labels extracted by ACES from the task's config as EHRSHOT's new-diagnosis labeler defines them (a prediction at each
discharge before the first diagnosis, positive when it comes within 365 days, a record that ends early negative), a
stratified seeded subject split with last-per-patient test rows, count features, and the verifier's AUROC gate."""

from __future__ import annotations

import json
from datetime import datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from ehrbench.errors import ValidationError
from ehrbench.meds.export import write_checked, write_checked_batches
from ehrbench.meds.modelling_baseline import count_features
from ehrbench.meds.modelling_tasks import TARGETS, aces_config, extract_labels, split_subjects, write_predicate_events
from ehrbench.workspace.verify import family

HYPERTENSION = TARGETS[0]
FAMILY = family("event_modelling")


def _events(rows: list[tuple]) -> pa.Table:
    return pa.table({"subject_id": pa.array([r[0] for r in rows], pa.int64()),
                     "time": pa.array([r[1] for r in rows], pa.timestamp("us")),
                     "code": [r[2] for r in rows],
                     "numeric_value": pa.array([None] * len(rows), pa.float32())})


def _discharge(subject: int, when: datetime, *diagnoses: str) -> list[tuple]:
    return [(subject, when, "HOSPITAL_DISCHARGE//HOME")] + [(subject, when, f"DIAGNOSIS//ICD//{d}") for d in diagnoses]


EVENTS = _events([
    (1, None, "GENDER//F"), (1, datetime(2050, 1, 1), "MEDS_BIRTH"),
    *_discharge(1, datetime(2100, 1, 5, 12), "10//E119"),
    *_discharge(1, datetime(2100, 6, 3), "10//I10"),          # 149.5 days after the first discharge
    *_discharge(2, datetime(2100, 3, 1)),
    *_discharge(2, datetime(2102, 1, 1), "9//4019"),          # 671 days later: beyond the horizon
    *_discharge(3, datetime(2099, 5, 1), "10//I110"),         # coded before any later discharge: never new
    *_discharge(3, datetime(2100, 2, 4)),
    *_discharge(4, datetime(2100, 5, 1)), (4, datetime(2100, 7, 1), "LAB//X"),  # the record ends: negative
])


@pytest.fixture
def events_file(tmp_path):
    path = tmp_path / "events.parquet"
    pq.write_table(EVENTS.sort_by([("subject_id", "ascending"), ("time", "ascending")]), path)
    return path


def test_aces_labels_a_discharge_before_the_first_diagnosis_by_whether_it_comes_within_365_days(tmp_path,
                                                                                                   events_file):
    config = tmp_path / "task.yaml"
    config.write_text(yaml.safe_dump(aces_config(HYPERTENSION)))
    labels = sorted(extract_labels(config, events_file).to_pylist(), key=lambda r: (r["subject_id"],
                                                                                      r["prediction_time"]))
    assert [(r["subject_id"], r["prediction_time"], r["boolean_value"]) for r in labels] == [
        (1, datetime(2100, 1, 5, 12), True),
        (2, datetime(2100, 3, 1), False),
        (4, datetime(2100, 5, 1), False)]
    # the discharge that brings the diagnosis (1 and 2's second), and every discharge of 3, are not prediction times


@pytest.mark.parametrize("target", TARGETS[:2], ids=lambda t: t.name)
def test_aces_labels_the_same_from_the_predicate_events_as_from_every_event(tmp_path, events_file, target):
    (tmp_path / "data").mkdir()
    pq.write_table(EVENTS, tmp_path / "data" / "0.parquet")
    predicate_events = tmp_path / "predicate_events.parquet"
    write_predicate_events(f"{tmp_path / 'data'}/*.parquet", predicate_events)
    kept = pq.read_table(predicate_events)
    # only discharges and diagnoses are left: no birth, sex or lab event (the record end of subject 4 is a lab)
    assert {c.split("//")[0] for c in kept.column("code").to_pylist()} == {"HOSPITAL_DISCHARGE", "DIAGNOSIS"}
    assert kept.num_rows == EVENTS.num_rows - 3
    config = tmp_path / "task.yaml"
    config.write_text(yaml.safe_dump(aces_config(target)))

    def labels(path):
        return sorted(tuple(r.values()) for r in extract_labels(config, path).to_pylist())

    assert labels(predicate_events) == labels(events_file) != []


def _labels(rows: list[tuple]) -> pa.Table:
    return pa.table({"subject_id": pa.array([r[0] for r in rows], pa.int64()),
                     "prediction_time": pa.array([datetime(2100, 1, r[1]) for r in rows], pa.timestamp("us")),
                     "boolean_value": [r[2] for r in rows]})


def test_the_split_is_seeded_stratified_and_tests_each_patients_last_prediction():
    rows = [(s, day, s <= 6 and day == 3) for s in range(1, 21) for day in (1, 2, 3)]
    split = split_subjects(_labels(rows), seed=5, key="t")
    again = split_subjects(_labels(rows), seed=5, key="t")
    assert split.train.equals(again.train) and split.test.equals(again.test)
    train, test = set(split.train.column("subject_id").to_pylist()), set(split.test.column("subject_id").to_pylist())
    assert not train & test and len(train) == 12 and len(test) == 8
    assert len(train & set(range(1, 7))) == 4  # 60 % of the 6 positive subjects (rounded), and of the 14 others
    assert set(split.test.column("prediction_time").to_pylist()) == {datetime(2100, 1, 3)}  # the last row of each
    assert split.train.num_rows == 36
    few = [(s, 1, s == 1) for s in range(1, 21)]
    assert split_subjects(_labels(few), seed=5, key="t") is None  # one positive subject cannot be on both sides


def test_count_features_use_events_at_or_before_the_prediction_time_and_age():
    rows = pa.table({"subject_id": pa.array([1, 1], pa.int64()),
                     "prediction_time": pa.array([datetime(2100, 1, 5, 12), datetime(2100, 6, 3)],
                                                 pa.timestamp("us"))})
    matrix, codes = count_features(EVENTS, rows)
    column = {code: i + 1 for i, code in enumerate(codes)}
    assert matrix[0, column["HOSPITAL_DISCHARGE//HOME"]] == 1 and matrix[1, column["HOSPITAL_DISCHARGE//HOME"]] == 2
    assert matrix[0, column["DIAGNOSIS//ICD//10//I10"]] == 0 and matrix[1, column["DIAGNOSIS//ICD//10//I10"]] == 1
    assert matrix[0, 0] == pytest.approx((datetime(2100, 1, 5) - datetime(2050, 1, 1)).days / 365.25)
    assert "GENDER//F" not in codes  # a static event has no time to be before
    again, _ = count_features(EVENTS, rows, codes)
    assert (again == matrix).all()


def test_count_features_read_a_parquet_file_as_they_read_a_table(tmp_path, events_file):
    rows = pa.table({"subject_id": pa.array([1, 2, 4], pa.int64()),
                     "prediction_time": pa.array([datetime(2100, 6, 3), datetime(2100, 3, 1), datetime(2100, 5, 1)],
                                                 pa.timestamp("us"))})
    from_table, codes = count_features(EVENTS, rows)
    from_file, file_codes = count_features(events_file, rows)
    # subject 1 by June: birth, two discharges, E119, I10; subjects 2 and 4: their first discharge
    assert file_codes == codes and (from_file == from_table)[:, 1:].all() and from_table[:, 1:].sum() == 5 + 1 + 1


def _meds_events(batches: list[list[tuple]]) -> pa.RecordBatchReader:
    schema = _events([(1, None, "X")]).schema
    return pa.RecordBatchReader.from_batches(schema, [_events(rows).to_batches()[0] for rows in batches])


def test_a_stream_of_batches_is_written_as_the_whole_table_would_be(tmp_path):
    import meds

    batches = [EVENTS.to_pylist()[:5], EVENTS.to_pylist()[5:]]
    rows = [[tuple(r.values()) for r in batch] for batch in batches]
    streamed = write_checked_batches(tmp_path / "streamed.parquet", meds.DataSchema, _meds_events(rows))
    whole = write_checked(tmp_path / "whole.parquet", meds.DataSchema, EVENTS)
    assert pq.read_table(streamed).equals(pq.read_table(whole))
    assert pq.read_metadata(streamed).num_row_groups == 2  # one batch in memory at a time
    empty = write_checked_batches(tmp_path / "empty.parquet", meds.DataSchema, _meds_events([]))
    assert pq.read_table(empty).num_rows == 0 and pq.read_schema(empty).equals(pq.read_schema(whole))


def test_a_batch_that_breaks_the_schema_is_named_and_nothing_is_left(tmp_path):
    import meds

    bad = pa.RecordBatchReader.from_batches(pa.schema([("subject_id", pa.string())]),
                                            [pa.record_batch({"subject_id": ["a"]})])
    with pytest.raises(ValidationError, match="bad.parquet: does not conform to meds.DataSchema"):
        write_checked_batches(tmp_path / "bad.parquet", meds.DataSchema, bad)
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def task(tmp_path):
    root = tmp_path / "new_hypertension"
    (root / "gold").mkdir(parents=True)
    (root / "workspace").mkdir()
    (root / "instruction.md").write_text("Write predictions.csv.\n")
    (root / "gold" / "task.json").write_text(json.dumps({"baseline": {"auroc": 0.7}}))
    pq.write_table(pa.table({"subject_id": pa.array([1, 2, 3, 4], pa.int64()),
                             "boolean_value": [True, False, False, True]}), root / "gold" / "test_labels.parquet")
    return root


def _predict(workspace, text: str) -> None:
    (workspace / "predictions.csv").write_text(text)


def test_the_auroc_gate(task, tmp_path):
    workspace = FAMILY.prepare(task, tmp_path / "ws")
    _predict(workspace, "subject_id,predicted_boolean_probability\n1,0.9\n2,0.1\n3,0.8\n4,0.3\n")
    verdict = FAMILY.verify(task, workspace)
    # positives 0.9 and 0.3 against negatives 0.1 and 0.8: 3 of the 4 pairs ordered right
    assert verdict.metrics["auroc"] == 0.75 and verdict.passed and verdict.reward == 1.0
    _predict(workspace, "subject_id,predicted_boolean_probability\n1,0.5\n2,0.5\n3,0.5\n4,0.5\n")
    verdict = FAMILY.verify(task, workspace)
    assert verdict.metrics["auroc"] == 0.5 and not verdict.passed and "below the baseline's 0.700" in verdict.problem


def test_the_oracle_passes_and_an_empty_or_partial_workspace_fails(task, tmp_path):
    solved = FAMILY.prepare(task, tmp_path / "solved")
    FAMILY.solve(task, solved)
    assert FAMILY.verify(task, solved).metrics["auroc"] == 1.0
    assert "no predictions.csv" in FAMILY.verify(task, FAMILY.prepare(task, tmp_path / "empty")).problem
    partial = FAMILY.prepare(task, tmp_path / "partial")
    _predict(partial, "subject_id,predicted_boolean_probability\n1,0.9\n2,0.1\n")
    verdict = FAMILY.verify(task, partial)
    assert not verdict.passed and verdict.metrics["missing_predictions"] == 2


@pytest.mark.parametrize(("text", "problem"), [
    ("subject,probability\n1,0.5\n", "missing column(s) predicted_boolean_probability, subject_id"),
    ("subject_id,predicted_boolean_probability\n1,nan\n", "line 2: the probability is not a finite number"),
    ("subject_id,predicted_boolean_probability\n1,high\n", "line 2: subject_id and predicted_boolean_probability"),
    ("subject_id,predicted_boolean_probability\n1,0.1\n1,0.2\n", "line 3: subject 1 is predicted twice"),
])
def test_malformed_predictions_are_named(task, tmp_path, text, problem):
    workspace = FAMILY.prepare(task, tmp_path / "ws")
    _predict(workspace, text)
    verdict = FAMILY.verify(task, workspace)
    assert not verdict.passed and problem in verdict.problem


def test_a_symbolic_link_is_refused_unread(task, tmp_path):
    workspace = FAMILY.prepare(task, tmp_path / "ws")
    (workspace / "predictions.csv").symlink_to(task / "gold" / "test_labels.parquet")
    assert "symbolic link is refused unread" in FAMILY.verify(task, workspace).problem
