"""MEDS conversion tasks (ehrbench.meds.conversion_tasks) and their verifier (ehrbench.meds.conversion_verify), written
from the MIMIC-IV demo's raw files: seeded plans, a workspace without gold, customisations that change exactly what
they say, the reference solution and an independent pandas implementation of the instruction passing, and each way
a submission can be wrong failing with the metric that says where."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml

from ehrbench.layout import WorkspaceTaskLayout
from ehrbench.meds.conversion_tasks import (
    BASE_TABLES,
    CUSTOMISATIONS,
    DEFAULT_EVENT_CONFIG,
    ConversionTaskPlan,
    customised_config,
    plan_conversion_tasks,
    write_conversion_task,
)
from ehrbench.meds.conversion_verify import summarise_events
from ehrbench.workspace.verify import family, main

PANDAS_SOLUTION = Path(__file__).parents[1] / "meds_pandas_conversion.py"
FAMILY = family("meds_conversion")


@pytest.fixture(scope="module")
def task(mimic_demo_dir, tmp_path_factory) -> Path:
    """One task over 12 demo subjects, with the customisations that touch admissions and lab results."""
    sources = {f"{p.parent.name}/{p.name.removesuffix('.csv.gz')}": p for p in mimic_demo_dir.glob("*/*.csv.gz")}
    subjects = tuple(sorted(int(line.split(",")[0]) for line in
                            (mimic_demo_dir / "demo_subject_id.csv").read_text().splitlines()[1:13]))
    plan = ConversionTaskPlan("meds_conversion_01", 0, (*BASE_TABLES, "hosp/labevents"),
                              ("admission_demographics", "lab_result_without_unit"), subjects)
    root = tmp_path_factory.mktemp("tasks") / plan.task_id
    write_conversion_task(plan, sources, root)
    return root


def fresh(task: Path, tmp_path: Path, name: str = "ws") -> Path:
    return FAMILY.prepare(task, tmp_path / name)


def test_plans_are_seeded_per_task_and_draw_only_available_tables():
    subjects = list(range(1, 201))
    four, two = plan_conversion_tasks(subjects, 4, seed=7), plan_conversion_tasks(subjects, 2, seed=7)
    assert four[:2] == two  # a task does not change when the count does
    assert plan_conversion_tasks(subjects, 4, seed=8) != four
    assert all(len(p.subjects) == 50 and len(p.customisations) == 2 and set(BASE_TABLES) <= set(p.tables)
               for p in four)
    without_icu = {"hosp/patients", "hosp/admissions", "hosp/diagnoses_icd", "hosp/labevents", "hosp/omr"}
    for plan in plan_conversion_tasks(subjects, 6, seed=7, available=without_icu):
        assert set(plan.tables) <= without_icu and "chart_prefix" not in plan.customisations


def test_each_customisation_changes_the_standard_configuration_only_where_it_says():
    standard = yaml.safe_load(DEFAULT_EVENT_CONFIG.read_text())
    for name, customisation in CUSTOMISATIONS.items():
        tables = tuple(sorted({*BASE_TABLES, *customisation.tables}))
        config = customised_config(tables, (name,))
        assert {table for table in tables if config[table] != standard[table]} == set(customisation.tables), name


def test_the_workspace_holds_the_instruction_configuration_and_tables_but_no_gold(task, tmp_path):
    workspace = fresh(task, tmp_path)
    assert sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*.*")) == [
        "data/hosp/admissions.csv.gz", "data/hosp/diagnoses_icd.csv.gz", "data/hosp/labevents.csv.gz",
        "data/hosp/patients.csv.gz", "event_config.yaml", "instruction.md"]
    instruction = (workspace / "instruction.md").read_text()
    assert "ADMISSION_INSURANCE//<insurance>" in instruction
    assert "LAB//RESULT//<itemid>, without the unit" in instruction and "12 patients" in instruction
    assert "meds/data/" in instruction and "{$admission_location ?? 'UNK'}" in instruction
    gold = json.loads(WorkspaceTaskLayout(task).task_json.read_text())
    assert gold["subjects"] == 12 and gold["expected"]["prefixes"]["ADMISSION_RACE"] > 0
    # the customised configuration is what the gold followed: no lab result code carries a unit
    events = pq.read_table(task / "gold" / "events.parquet")
    lab_results = [c for c in events.column("code").to_pylist() if c.startswith("LAB//RESULT//")]
    assert lab_results and all(c.count("//") == 2 for c in lab_results)


def test_the_reference_solution_passes_and_an_empty_workspace_fails(task, tmp_path):
    solved = fresh(task, tmp_path, "solved")
    FAMILY.solve(task, solved)
    verdict = FAMILY.verify(task, solved)
    assert verdict.passed and verdict.reward == 1.0 and verdict.metrics["events_missing"] == 0
    empty = FAMILY.verify(task, fresh(task, tmp_path, "empty"))
    assert (empty.passed, empty.reward) == (False, 0.0) and "no MEDS data shards" in empty.problem


def test_an_independent_pandas_conversion_from_the_instruction_passes(task, tmp_path):
    workspace = fresh(task, tmp_path)
    run = subprocess.run([sys.executable, str(PANDAS_SOLUTION)], cwd=workspace, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    verdict = FAMILY.verify(task, workspace)
    assert verdict.passed, verdict.problem


def _write(workspace: Path, table: pa.Table, name: str = "0.parquet") -> None:
    (workspace / "meds" / "data").mkdir(parents=True, exist_ok=True)
    pq.write_table(table, workspace / "meds" / "data" / name)


def _solved(task: Path, tmp_path: Path) -> tuple[Path, pa.Table]:
    workspace = fresh(task, tmp_path)
    FAMILY.solve(task, workspace)
    return workspace, pq.read_table(workspace / "meds" / "data" / "0.parquet")


def test_the_standard_mapping_where_the_task_customised_it_fails_on_the_customised_prefix(task, tmp_path):
    workspace, events = _solved(task, tmp_path)
    codes = events.column("code").to_pylist()
    kept = pa.array([not c.startswith("ADMISSION_") for c in codes])  # demographics left as in the standard ETL
    _write(workspace, events.filter(kept))
    verdict = FAMILY.verify(task, workspace)
    assert not verdict.passed and verdict.metrics["events_extra"] == 0
    assert verdict.metrics["prefixes_missing"] == ["ADMISSION_INSURANCE", "ADMISSION_LANGUAGE",
                                                   "ADMISSION_MARITAL_STATUS", "ADMISSION_RACE"]
    assert (verdict.metrics["customised_prefixes_right"], verdict.metrics["standard_prefixes_right"]) == (False, True)


def test_a_changed_default_fails_on_an_untouched_prefix(task, tmp_path):
    workspace, events = _solved(task, tmp_path)
    codes = pc.replace_substring(events.column("code"), "HOSPITAL_DISCHARGE//", "DISCHARGE//")
    _write(workspace, events.set_column(events.schema.get_field_index("code"), "code", codes))
    verdict = FAMILY.verify(task, workspace)
    assert not verdict.passed and verdict.metrics["prefixes_unexpected"] == ["DISCHARGE"]
    assert (verdict.metrics["customised_prefixes_right"], verdict.metrics["standard_prefixes_right"]) == (True, False)
    assert set(verdict.metrics["prefixes_differing"]) == {"DISCHARGE", "HOSPITAL_DISCHARGE"}


def test_one_value_off_fails_with_one_missing_and_one_extra_event(task, tmp_path):
    workspace, events = _solved(task, tmp_path)
    values = events.column("numeric_value").to_pylist()
    first = next(i for i, v in enumerate(values) if v is not None)
    values[first] += 1.0
    _write(workspace, events.set_column(events.schema.get_field_index("numeric_value"), "numeric_value",
                                        pa.array(values, pa.float32())))
    verdict = FAMILY.verify(task, workspace)
    assert not verdict.passed
    assert (verdict.metrics["events_missing"], verdict.metrics["events_extra"]) == (1, 1)
    assert verdict.metrics["found_sha256"] != verdict.metrics["expected_sha256"]


def test_shards_may_split_the_events_but_each_must_be_in_meds_order(task, tmp_path):
    workspace, events = _solved(task, tmp_path)
    (workspace / "meds" / "data" / "0.parquet").unlink()
    half = events.num_rows // 2
    _write(workspace, events.slice(0, half), "a.parquet")
    _write(workspace, events.slice(half), "b.parquet")
    assert FAMILY.verify(task, workspace).passed
    _write(workspace, events.slice(half).take(pa.array(range(events.num_rows - half - 1, -1, -1))), "b.parquet")
    verdict = FAMILY.verify(task, workspace)
    assert not verdict.passed and "b.parquet: not in MEDS order" in verdict.problem


def test_a_file_outside_the_meds_schema_or_a_symbolic_link_is_refused(task, tmp_path):
    workspace, events = _solved(task, tmp_path)
    as_text = events.set_column(1, "time", pc.cast(events.column("time"), pa.string()))
    _write(workspace, as_text)
    verdict = FAMILY.verify(task, workspace)
    assert not verdict.passed and "does not conform to meds.DataSchema" in verdict.problem
    (workspace / "meds" / "data" / "0.parquet").unlink()
    (workspace / "meds" / "data" / "0.parquet").symlink_to(task / "gold" / "events.parquet")
    verdict = FAMILY.verify(task, workspace)
    assert not verdict.passed and "symbolic link is refused unread" in verdict.problem


def test_the_summary_hash_ignores_row_order_but_not_content():
    table = pa.table({"subject_id": [1, 2], "time": pa.array([None, None], pa.timestamp("us")), "code": ["A", "B"],
                      "numeric_value": pa.array([None, 1.5], pa.float32()), "text_value": [None, "x"]})
    reordered = table.take([1, 0])
    assert summarise_events(table)["content_sha256"] == summarise_events(reordered)["content_sha256"]
    changed = table.set_column(4, "text_value", pa.array([None, "y"]))
    assert summarise_events(table)["content_sha256"] != summarise_events(changed)["content_sha256"]
    assert summarise_events(table)["prefixes"] == {"A": 1, "B": 1}


def test_the_script_exits_0_only_on_a_pass(task, tmp_path, capsys):
    workspace = fresh(task, tmp_path)
    assert main(["meds_conversion", str(task), str(workspace)]) == 1
    failed = json.loads(capsys.readouterr().out)
    assert failed["passed"] is False and "no MEDS data shards" in failed["problem"]
    FAMILY.solve(task, workspace)
    assert main(["meds_conversion", str(task), str(workspace)]) == 0
    assert json.loads(capsys.readouterr().out)["reward"] == 1.0
