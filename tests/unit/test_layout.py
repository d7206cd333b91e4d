"""The on-disk layout: every path of a build folder, relative to it, as published builds already hold them (the
contract with existing builds and with every reader of them), and the data directory's."""

from __future__ import annotations

from pathlib import Path

from ehrbench.layout import MANIFEST, AuditTaskLayout, BuildLayout, DataLayout

ROOT = Path("/data/benchmarks/20261120T120000Z")


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_every_path_of_a_build_folder_is_the_one_published_builds_hold():
    build = BuildLayout(ROOT)
    assert {name: relative(path) for name, path in {
        "manifest": build.manifest,
        "owner": build.owner,
        "db": build.db,
        "hidden": build.hidden,
        "lineage": build.lineage("renamed_random/eicu"),
        "rename_map": build.rename_map("renamed/mimic_iv"),
        "fhir": build.fhir,
        "fhir_resources": build.fhir_resources,
        "fhir_ndjson": build.fhir_ndjson("Observation"),
        "fhir_view_resources": build.fhir_view_resources("mimic_iv_on_fhir"),
        "fhir_view_ndjson": build.fhir_ndjson("Observation", "mimic_iv_on_fhir"),
        "fhir_ground_truth": build.fhir_ground_truth("ehrsql2024_valid"),
        "questions": build.questions,
        "exports": build.exports,
        "ehrsql2024_export": build.ehrsql2024_export,
        "chatqa_export": build.chatqa_export,
        "quarantine": build.quarantine,
        "question_quarantine": build.question_quarantine,
        "gx_docs": build.gx_docs,
        "gx_index": build.gx_index,
        "dq": build.dq,
        "noteqa": build.noteqa,
        "noteqa_questions": build.noteqa_questions,
        "noteqa_notes": build.noteqa_notes(False),
        "noteqa_synthetic_notes": build.noteqa_notes(True),
        "ehrnoteqa_export": build.ehrnoteqa_export,
        "noteqa_quarantine": build.noteqa_quarantine,
        "meds_raw": build.meds("raw"),
        "meds_shifted": build.meds("shifted"),
    }.items()} == {
        "manifest": "manifest.json",
        "owner": ".owner.json",
        "db": "db",
        "hidden": "hidden",
        "lineage": "hidden/lineage/renamed_random/eicu.parquet",
        "rename_map": "hidden/rename_maps/renamed/mimic_iv.json",
        "fhir": "fhir",
        "fhir_resources": "fhir/resources.duckdb",
        "fhir_ndjson": "fhir/Observation.ndjson.gz",
        "fhir_view_resources": "fhir/mimic_iv_on_fhir/resources.duckdb",
        "fhir_view_ndjson": "fhir/mimic_iv_on_fhir/Observation.ndjson.gz",
        "fhir_ground_truth": "hidden/fhir_ground_truth/ehrsql2024_valid.parquet",
        "questions": "questions/questions.parquet",
        "exports": "exports",
        "ehrsql2024_export": "exports/ehrsql2024",
        "chatqa_export": "exports/chatqa",
        "quarantine": "quarantine",
        "question_quarantine": "quarantine/questions.parquet",
        "gx_docs": "reports/gx",
        "gx_index": "reports/gx/index.html",
        "dq": "dq",
        "noteqa": "noteqa",
        "noteqa_questions": "noteqa/questions.parquet",
        "noteqa_notes": "noteqa/notes.parquet",
        "noteqa_synthetic_notes": "noteqa/synthetic_notes.parquet",
        "ehrnoteqa_export": "exports/ehrnoteqa",
        "noteqa_quarantine": "quarantine/noteqa.parquet",
        "meds_raw": "meds/raw",
        "meds_shifted": "meds/shifted",
    }
    assert [relative(p) for p in build.database_files("ehrsql2024", "mimic_iv")] == [
        "db/ehrsql2024/mimic_iv.duckdb", "db/ehrsql2024/mimic_iv.sqlite"]
    assert MANIFEST == "manifest.json"
    assert build.relative(build.question_quarantine) == "quarantine/questions.parquet"


def test_an_audit_task_folder_keeps_its_visible_and_hidden_files_apart():
    task = BuildLayout(ROOT).dq_task("combined_clues")
    assert task.task_id == "combined_clues"
    assert {name: relative(path) for name, path in {
        "root": task.root, "instruction": task.instruction, "data": task.data, "data_file": task.data_file("labs"),
        "gold": task.gold, "labels": task.labels, "task_json": task.task_json}.items()} == {
        "root": "dq/combined_clues",
        "instruction": "dq/combined_clues/instruction.md",
        "data": "dq/combined_clues/data",
        "data_file": "dq/combined_clues/data/labs.csv.gz",
        "gold": "dq/combined_clues/gold",
        "labels": "dq/combined_clues/gold/labels.parquet",
        "task_json": "dq/combined_clues/gold/task.json",
    }


def test_the_audit_tasks_of_a_build_are_the_folders_with_an_instruction(tmp_path):
    build = BuildLayout(tmp_path)
    for name in ("b_clues", "a", "b"):
        build.dq_task(name).root.mkdir(parents=True)
        build.dq_task(name).instruction.write_text("audit")
    (build.dq / "no_instruction").mkdir()
    assert [task.task_id for task in build.dq_tasks()] == ["a", "b", "b_clues"]
    assert build.dq_tasks()[0] == AuditTaskLayout(tmp_path / "dq" / "a")
    assert BuildLayout(tmp_path / "missing").dq_tasks() == []


def test_the_data_directory_and_its_builds(tmp_path):
    layout = DataLayout(root=tmp_path)
    assert {name: path.relative_to(tmp_path).as_posix() for name, path in {
        "raw": layout.raw, "warehouse": layout.warehouse, "build_lock": layout.build_lock,
        "benchmarks": layout.benchmarks, "latest": layout.latest, "results": layout.results,
        "build_logs": layout.build_logs("b1"), "dbt_work": layout.dbt_work}.items()} == {
        "raw": "raw", "warehouse": "warehouse.duckdb", "build_lock": "build.lock", "benchmarks": "benchmarks",
        "latest": "benchmarks/latest", "results": "results", "build_logs": "logs/b1", "dbt_work": "dbt"}
    assert layout.build("latest") == BuildLayout(tmp_path / "benchmarks" / "latest")
    assert layout.build("b1").manifest == tmp_path / "benchmarks" / "b1" / "manifest.json"
    elsewhere = tmp_path / "copied-build"
    elsewhere.mkdir()
    assert layout.build(str(elsewhere)) == BuildLayout(elsewhere)  # a build folder's own path
