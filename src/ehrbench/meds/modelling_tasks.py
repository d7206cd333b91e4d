"""Event-modelling tasks (HealthAgentBench's "EHR event modelling", its port of EHRSHOT's new-diagnosis tasks;
docs/benchmarks.md#event-modelling-tasks): from the build's MEDS data, predict at a hospital discharge whether a
diagnosis is first coded within the next 365 days. The target is an ACES task config; ACES (es-aces) extracts its
labels; subjects are split, test subjects' events cut at their prediction time; a count-features gradient-boosting
baseline is trained and scored at build time, and an agent passes when its test AUROC is at least the baseline's.

    workspace_tasks/event_modelling/<task_id>/
      instruction.md
      workspace/task.yaml                      the ACES task config the labels come from
      workspace/data/{train,test}/0.parquet    MEDS events: train subjects whole, test subjects up to prediction time
      workspace/metadata/codes.parquet         the codes' descriptions (the build's MEDS metadata)
      workspace/labels/train.parquet           subject_id, prediction_time, boolean_value (meds LabelSchema)
      workspace/labels/test.parquet            subject_id, prediction_time: one row per test subject, no label
      gold/test_labels.parquet                 the test rows' labels
      gold/task.json                           target, seed, cohort figures and the baseline's AUROC
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import meds
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

from ehrbench.layout import WorkspaceTaskLayout
from ehrbench.meds.export import BATCH_EVENTS, EVENT_ORDER, write_checked, write_checked_batches
from ehrbench.meds.modelling_baseline import BASELINE, train_and_score
from ehrbench.seeding import keyed_rng
from ehrbench.warehouse import open_duckdb

FAMILY = "event_modelling"
INSTRUCTION_TEMPLATE = Path(__file__).parent / "data" / "modelling_instruction.md"
HORIZON_DAYS = 365
TRAIN_SHARE = 0.6  # of the subjects with a label row, stratified by whether any of their rows is positive
MIN_POSITIVE_SUBJECTS = 2  # in train and in test each: fewer makes no AUROC worth a gate
MAX_SUBJECTS = 10_000  # a seeded sample of the cohort beyond this (the full MIMIC-IV has ~200,000 with a discharge)
DISCHARGE_REGEX = "^HOSPITAL_DISCHARGE//"  # every config's trigger
# DuckDB's memory for sorting a task's train and test events, below the process's (a sixth of the machine): the sorts
# spill past it. At 10,000 patients (~60 M train events a task) the three tasks took 80 s instead of 75 s and the
# process peaked at 2.9 GiB instead of 4.0, where it set the whole build's peak (beside the fhir stage's export)
EVENTS_MEMORY_LIMIT = "2GB"


@dataclass(frozen=True)
class Target:
    """A new-onset diagnosis: its name, what it is, and its ICD-10 / ICD-9 code prefixes as an ACES regex."""

    name: str
    label: str
    regex: str


# EHRSHOT's new-diagnosis tasks first (hypertension, hyperlipidemia), then common chronic diagnoses; a build makes
# the first `count` of these whose cohort has enough positive subjects
TARGETS = (
    Target("new_hypertension", "hypertension", r"^DIAGNOSIS//ICD//(10//I1[0-6]|9//40[1-5])"),
    Target("new_hyperlipidemia", "hyperlipidemia", r"^DIAGNOSIS//ICD//(10//E78|9//272)"),
    Target("new_diabetes", "diabetes mellitus", r"^DIAGNOSIS//ICD//(10//E1[01]|9//250)"),
    Target("new_ckd", "chronic kidney disease", r"^DIAGNOSIS//ICD//(10//N18|9//585)"),
    Target("new_heart_failure", "heart failure", r"^DIAGNOSIS//ICD//(10//I50|9//428)"),
    Target("new_afib", "atrial fibrillation", r"^DIAGNOSIS//ICD//(10//I48|9//4273)"),
    Target("new_anemia", "anaemia", r"^DIAGNOSIS//ICD//(10//D6[234]|9//28[05])"),
    Target("new_aki", "acute kidney injury", r"^DIAGNOSIS//ICD//(10//N17|9//584)"),
)


def aces_config(target: Target) -> dict:
    """The ACES task config of a target: at each hospital discharge of a patient not yet coded with it (up to and
    including that discharge, whose diagnoses share its time), is it coded within the next HORIZON_DAYS days?
    Censored rows count as negative, as in EHRSHOT's labeler."""
    return {
        "description": f"At each hospital discharge of a patient never coded with {target.label} up to and including "
                       f"it, predict whether {target.label} is first coded in the following {HORIZON_DAYS} days.",
        "predicates": {"hospital_discharge": {"code": {"regex": DISCHARGE_REGEX}},
                       "target_diagnosis": {"code": {"regex": target.regex}}},
        "trigger": "hospital_discharge",
        "windows": {
            "history": {"start": None, "end": "trigger", "start_inclusive": True, "end_inclusive": True,
                        "index_timestamp": "end", "has": {"target_diagnosis": "(None, 0)"}},
            "outcome": {"start": "history.end", "end": f"start + {HORIZON_DAYS}d", "start_inclusive": False,
                        "end_inclusive": True, "label": "target_diagnosis"}}}


def extract_labels(config_path: Path, data_path: Path) -> pa.Table:
    """subject_id, prediction_time, boolean_value of every trigger the ACES config keeps, by ACES itself."""
    from aces import config, predicates, query  # polars and hydra load only when tasks are made
    from omegaconf import DictConfig

    task = config.TaskExtractorConfig.load(config_path=str(config_path))
    found = query.query(task, predicates.get_predicates_df(task, DictConfig({"path": str(data_path),
                                                                             "standard": "meds"})))
    if found.is_empty():
        return pa.table({"subject_id": pa.array([], pa.int64()), "prediction_time": pa.array([], pa.timestamp("us")),
                         "boolean_value": pa.array([], pa.bool_())})
    rows = found.to_arrow()
    return pa.table({"subject_id": rows.column("subject_id").cast(pa.int64()),
                     "prediction_time": rows.column("index_timestamp").cast(pa.timestamp("us")),
                     "boolean_value": pc.greater(rows.column("label"), 0)})


@dataclass(frozen=True)
class Split:
    train: pa.Table  # every label row of the train subjects
    test: pa.Table  # the last label row of each test subject (EHRSHOT's last-per-patient test set)


def split_subjects(labels: pa.Table, seed: int, key: str) -> Split | None:
    """A seeded subject split, stratified by whether a subject has a positive row; None when either side would have
    fewer than MIN_POSITIVE_SUBJECTS positive subjects."""
    with open_duckdb() as con:
        con.register("labels", labels)
        subjects = con.execute("select subject_id, bool_or(boolean_value) from labels group by 1 order by 1"
                               ).fetchall()
    rng = keyed_rng(seed, FAMILY, key)
    if len(subjects) > MAX_SUBJECTS:
        subjects = sorted(subjects[i] for i in rng.choice(len(subjects), MAX_SUBJECTS, replace=False))
    train: set[int] = set()
    for positive in (True, False):
        group = [s for s, p in subjects if p == positive]
        train.update(group[i] for i in rng.permutation(len(group))[:round(len(group) * TRAIN_SHARE)])
    positives = {s for s, p in subjects if p}
    test = {s for s, _ in subjects} - train
    if min(len(positives & train), len(positives & test)) < MIN_POSITIVE_SUBJECTS:
        return None
    with open_duckdb() as con:
        con.register("labels", labels)
        con.register("train_subjects", pa.table({"subject_id": sorted(train)}))
        con.register("test_subjects", pa.table({"subject_id": sorted(test)}))
        train_rows = con.execute("select * from labels where subject_id in (select subject_id from train_subjects) "
                                 "order by subject_id, prediction_time").to_arrow_table()
        test_rows = con.execute("select subject_id, max(prediction_time) as prediction_time, "
                                "arg_max(boolean_value, prediction_time) as boolean_value from labels where subject_id "
                                "in (select subject_id from test_subjects) group by 1 order by 1").to_arrow_table()
    return Split(train_rows, test_rows)


def write_modelling_tasks(meds_root: Path, tasks_dir: Path, seed: int, count: int) -> list[dict]:
    """The first `count` TARGETS with enough positive subjects, as tasks under `tasks_dir` (from the MEDS dataset at
    `meds_root`, e.g. the build's meds/raw); returns their gold/task.json."""
    shards = f"{meds_root / meds.data_subdirectory}/*.parquet"
    written = []
    with tempfile.TemporaryDirectory(prefix="ehrbench-aces-") as scratch:
        events = Path(scratch) / "predicate_events.parquet"  # one file for ACES (it reads a file, not shards)
        write_predicate_events(shards, events)
        for target in TARGETS:
            if len(written) == count:
                break
            config_path = Path(scratch) / f"{target.name}.yaml"
            config_path.write_text(yaml.safe_dump(aces_config(target), sort_keys=False))
            split = split_subjects(extract_labels(config_path, events), seed, target.name)
            if split is None:
                continue
            written.append(write_modelling_task(target, split, shards, meds_root, seed,
                                                WorkspaceTaskLayout(tasks_dir / target.name)))
    return written


def write_predicate_events(shards: str, path: Path) -> None:
    """The events of the MEDS `shards` (a parquet glob) that a predicate of some target's ACES config matches
    (discharges, target diagnoses): the columns ACES reads, sorted. ACES sums each predicate over a window's events,
    so an event that matches none adds nothing to any window: it labels the same from these as from every event (tests
    pin it), and reads, at 10,000 patients, ~1 % of ~100 M events into memory instead of all of them."""
    regex = "|".join([DISCHARGE_REGEX, *(target.regex for target in TARGETS)]).replace("'", "''")
    with open_duckdb() as con:
        con.execute(f"copy (select subject_id, time, code from read_parquet('{shards}') where regexp_matches(code, "
                    f"'{regex}') order by subject_id, time nulls first, code) to '{path}' (format parquet)")


def write_modelling_task(target: Target, split: Split, shards: str, meds_root: Path, seed: int,
                         task: WorkspaceTaskLayout) -> dict:
    workspace = task.workspace
    (workspace / "labels").mkdir(parents=True)
    (workspace / "task.yaml").write_text(yaml.safe_dump(aces_config(target), sort_keys=False), encoding="utf-8")
    write_checked(workspace / "labels" / "train.parquet", meds.LabelSchema, split.train)
    test_rows = split.test.select(["subject_id", "prediction_time"])
    pq.write_table(test_rows, workspace / "labels" / "test.parquet")
    train_events, test_events = workspace / "data" / "train" / "0.parquet", workspace / "data" / "test" / "0.parquet"
    # streamed from the shards to the files: a cohort of 10,000 holds ~100 M events
    with open_duckdb(memory_limit=EVENTS_MEMORY_LIMIT) as con:
        con.execute(f"create view events as select subject_id, time, code, numeric_value, text_value "
                    f"from read_parquet('{shards}')")
        con.register("train_rows", split.train)
        con.register("test_rows", test_rows)
        write_checked_batches(train_events, meds.DataSchema, con.execute(
            "select * from events where subject_id in (select subject_id from train_rows) "
            f"order by {EVENT_ORDER}").to_arrow_reader(BATCH_EVENTS))
        # a test subject's events up to its prediction time (static ones too): nothing after can leak its label
        write_checked_batches(test_events, meds.DataSchema, con.execute(
            "select e.* from events e join test_rows t using (subject_id) where e.time is null "
            f"or e.time <= t.prediction_time order by {EVENT_ORDER}").to_arrow_reader(BATCH_EVENTS))
    (workspace / "metadata").mkdir()
    shutil.copyfile(meds_root / meds.code_metadata_filepath, workspace / "metadata" / "codes.parquet")
    baseline = train_and_score(train_events, split.train, test_events, split.test, seed)
    task.gold.mkdir(parents=True)
    pq.write_table(split.test, task.gold / "test_labels.parquet")
    gold = {"family": FAMILY, "task_id": task.task_id, "target": target.name, "label": target.label,
            "regex": target.regex, "seed": seed, "horizon_days": HORIZON_DAYS,
            "train": {"subjects": len(set(split.train.column("subject_id").to_pylist())), "rows": split.train.num_rows,
                      "positive_rows": int(np.sum(split.train.column("boolean_value").to_numpy(zero_copy_only=False)))},
            "test": {"subjects": split.test.num_rows,
                     "positive": int(np.sum(split.test.column("boolean_value").to_numpy(zero_copy_only=False)))},
            "baseline": baseline}
    task.task_json.write_text(json.dumps(gold, indent=2) + "\n", encoding="utf-8")
    task.instruction.write_text(INSTRUCTION_TEMPLATE.read_text(encoding="utf-8").format(
        label=target.label, horizon=HORIZON_DAYS, train_rows=split.train.num_rows,
        train_subjects=gold["train"]["subjects"], train_positive=gold["train"]["positive_rows"],
        test_subjects=split.test.num_rows, baseline=BASELINE["description"]), encoding="utf-8")
    return gold
