"""The real build on the demo data through the CLI (the session's `demo_build`, tests/integration/conftest.py): what
it publishes, bad input that must leave the published builds untouched, and evaluations on it. A second build in
the same data directory is test_prefect_deployment's (from a copy of this build, tests/integration/conftest.py)."""

from __future__ import annotations

import csv
import gzip
import json
import logging
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import duckdb
import httpx
import pyarrow.parquet as pq
import pytest

from ehrbench.profiles import schema_renames
from ehrbench.renaming import SchemaRename, published_rename
from tests.browser import chromium_page, screenshot
from tests.conftest import EHRSQL_2024, mimic_fhir_id
from tests.integration.ehrbench_cli import EHRBENCH, error_line, run_cli

pytestmark = pytest.mark.integration


def run_prefect(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).with_name("prefect")), *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_concurrent_build_fails_fast_with_build_in_progress(demo_build):
    assert demo_build["second_returncode"] != 0
    assert "build in progress" in error_line(demo_build["second_stderr"])
    assert demo_build["second_seconds"] < 60  # fails fast: no stage ran


def test_the_build_tells_a_person_what_it_does_in_a_screenful(demo_build):
    """A line per stage, the warnings, the summary and the next commands on stderr; no dbt or Prefect chatter
    there; the published folder alone on stdout (not a terminal); dbt's and the run's full logs on disk."""
    lines, folder = demo_build["stderr"].strip().splitlines(), demo_build["folder"]
    assert len(lines) <= 40, "\n".join(lines)
    stage_lines = [line for line in lines if re.match(r"\[\d+/10\] ", line)]
    order = [line.split()[1] for line in stage_lines]
    # the stages from databases on run side by side: their lines come as they end, fhir's and questions' (in either
    # order) after databases'; the side stages (dq, noteqa, meds) may end before the databases stage does
    assert order[:3] == ["ingest", "transform", "validate"] and order[-1] == "publish"
    assert sorted(order[3:-1]) == ["databases", "dq", "fhir", "meds", "noteqa", "questions"]
    assert order.index("databases") < min(order.index("fhir"), order.index("questions"))
    line = {name: stage_lines[order.index(name)] for name in order}
    assert re.search(r"\[6/10\] questions +[\d.]+ s  [\d,]+ kept \(", line["questions"])
    assert re.search(r"\[8/10\] noteqa +[\d.]+ s  [\d,]+ note questions \(.*\) over [\d,]+ synthetic notes",
                     line["noteqa"])
    assert re.search(r"\[9/10\] meds +[\d.]+ s  raw: 100 subjects, [\d,]+ events, .* \(MEDS [\d.]+, schemas checked\)",
                     line["meds"])
    summary = lines.index(next(line for line in lines if line.startswith(f"Build {folder.name} published")))
    assert f"  folder     {folder}" in lines[summary:]
    assert lines[-4] == "Next:" and "ehrbench evaluate" in lines[-3]
    assert not any("Beginning flow run" in line or "START sql" in line or "\x1b[" in line for line in lines)
    assert demo_build["stdout"].strip() == str(folder)
    logs = demo_build["data_dir"] / "logs" / folder.name
    dbt_log = (logs / "dbt.log").read_text()
    assert "START sql" in dbt_log and "\x1b[" not in dbt_log  # every node, without colour codes
    assert "[10/10] publish" in (logs / "build.log").read_text()


def test_build_publishes_manifest_with_verified_inputs_and_counts(demo_build):
    data_dir, folder = demo_build["data_dir"], demo_build["folder"]
    benchmarks = data_dir / "benchmarks"
    assert folder.parent == benchmarks and folder.is_dir()
    assert os.readlink(benchmarks / "latest") == folder.name
    assert not list(benchmarks.glob("*.tmp")), "staging folder left behind"
    manifest = json.loads((folder / "manifest.json").read_text())

    inputs = {(f["dataset"], f["table"]): f for f in manifest["inputs"]}
    # ../shared/data/README.md: chartevents is a reconstruction; eICU lab and intakeOutput are not the
    # official files; vitalPeriodic and nurseCharting are missing. Every other file is byte-identical.
    assert {k for k, f in inputs.items() if f["status"] == "unverified"} == {
        ("mimic_iv", "chartevents"), ("eicu", "lab"), ("eicu", "intakeoutput")}
    assert {k for k, f in inputs.items() if f["status"] == "absent"} == {
        ("eicu", "vitalperiodic"), ("eicu", "nursecharting")}
    assert inputs[("mimic_iv", "patients")]["sha256"] == inputs[("mimic_iv", "patients")]["expected_sha256"]

    raw = manifest["raw_row_counts"]
    assert raw["raw_mimic_iv.patients"] == 100  # the MIMIC-IV demo has 100 patients
    assert raw["raw_eicu.lab"] == 29_961  # the subset documented in shared/data/README.md
    assert raw["raw_eicu.intakeoutput"] == 100_466
    assert raw["raw_eicu.vitalperiodic"] == 0
    built = {name: count for name, count in manifest["built_row_counts"].items() if name.startswith("staging_")}
    assert len(built) == 26
    for name, count in built.items():  # staging cleans values but never drops rows
        schema, model = name.split(".")
        dataset, table = model.removeprefix("stg_").split("__")
        assert count == raw[f"raw_{dataset}.{table}"], name

    assert manifest["parameters"]["seed"] == 0 and manifest["seed"] == 0
    assert manifest["packages"]["prefect"].startswith("3.8.")
    assert all(v["success"] for v in manifest["validation"].values())
    assert sum(v["evaluated"] for v in manifest["validation"].values()) > 80  # dbt holds the schema tests
    assert any("vitalperiodic" in s for s in manifest["validation"]["staging_eicu"]["skipped"])
    assert set(manifest["stages"]) >= {"ingest", "transform", "validate"}
    # the empty optional vitalperiodic
    assert manifest["dbt"]["build --select staging.mimic_iv staging.eicu"]["warn"] == 1
    assert set(manifest["stages"]) >= {"databases"}
    span = {name: (datetime.fromisoformat(t["started_at"]).timestamp(), t["seconds"])
            for name, t in manifest["stages"].items()}
    ends = {name: start + seconds for name, (start, seconds) in span.items()}
    # the side stages start while the databases stage runs (on their copy of its first dbt run's models), fhir once
    # its second has built the FHIR models, questions once the databases' export has ended (beside fhir: it reads the
    # FHIR models, which fhir exports; test_build_generates_validated_questions… checks that its ids are in fhir's
    # files). The three side stages are handed to the pool (a worker per core) at once and its workers take them in
    # no set order: as many as there are workers start during the databases stage, whichever they are (dq, the first
    # added, came third in one run)
    side = sorted(span[name][0] for name in ("dq", "noteqa", "meds"))
    workers = min(os.cpu_count() or 1, len(side))
    assert span["databases"][0] < side[0] and all(start < ends["databases"] for start in side[:workers])
    assert span["fhir"][0] > span["databases"][0]
    assert span["questions"][0] >= ends["databases"]
    assert not (data_dir / "side_stage_inputs.duckdb").exists()  # the copy lives as long as the build
    # each stage's CPU seconds since it started, in its own process: some, and no more than all the cores in its time
    # (a clock counting the process's CPU from its start would give validate, the flow's third stage, ingest's too)
    cores = os.cpu_count() or 1
    for name, timing in manifest["stages"].items():
        assert 0 < timing["cpu_seconds"] <= timing["seconds"] * cores + 0.5, (name, timing)
    assert "dq: 12 tasks" in (data_dir / "logs" / folder.name / "build.log").read_text()  # a worker's run log


def test_build_exports_the_benchmark_databases(demo_build):
    folder = demo_build["folder"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert set(manifest["databases"]) == {"ehrsql2024/mimic_iv", "ehrsql_eicu/eicu", "renamed/mimic_iv", "renamed/eicu",
                                          "renamed_random/mimic_iv", "renamed_random/eicu"}
    assert manifest["profile_vars"]["ehrsql2024"]["current_time"] == "2100-12-31 23:59:00"
    mimic = manifest["databases"]["ehrsql2024/mimic_iv"]
    assert (folder / mimic["duckdb"]).is_file() and (folder / mimic["sqlite"]).is_file()
    # docs/benchmarks.md#ehrsql-2024-database: 4 current + 90 discharged patients
    assert mimic["row_counts"]["patients"] == 94
    assert len(mimic["row_counts"]) == 17  # the EHRSQL-2024 schema
    lite = sqlite3.connect(folder / mimic["sqlite"])
    try:
        assert lite.execute("select count(*) from patients").fetchone() == (94,)
        latest = lite.execute("select max(admittime) from admissions").fetchone()[0]
        assert "2100-01-01 00:00:00" <= latest <= "2100-12-31 23:59:00"
    finally:
        lite.close()
    eicu = manifest["databases"]["ehrsql_eicu/eicu"]
    assert eicu["row_counts"]["patient"] > 0 and eicu["row_counts"]["vitalperiodic"] == 0


def test_build_exports_the_renamed_profiles_and_hidden_files(demo_build):
    folder = demo_build["folder"]
    manifest = json.loads((folder / "manifest.json").read_text())
    databases = manifest["databases"]
    published = {db: published_rename(db) for db in ("mimic_iv", "eicu")}
    for database, base in (("mimic_iv", "ehrsql2024/mimic_iv"), ("eicu", "ehrsql_eicu/eicu")):
        renamed, drawn = databases[f"renamed/{database}"], databases[f"renamed_random/{database}"]
        assert set(renamed["row_counts"]) == {t.target for t in published[database].tables}
        rename_map = SchemaRename.from_dict(json.loads((folder / drawn["hidden"]["rename_map"]).read_text()))
        assert rename_map == schema_renames(manifest["seed"])[f"renamed_random/{database}"]
        # the drawn tables hold the renamed tables' rows; the EHRSQL-compatible ones at most as many
        for table in rename_map.tables:
            renamed_rows = renamed["row_counts"][published[database].table(table.source).target]
            assert drawn["row_counts"][table.target] == renamed_rows
            assert databases[base]["row_counts"][table.source] <= renamed_rows
    # agent-facing files hold only benchmark tables; lineage and maps are under hidden/
    for info in databases.values():
        lite = sqlite3.connect(folder / info["sqlite"])
        try:
            names = {name for (name,) in lite.execute("select name from sqlite_master where type = 'table'")}
        finally:
            lite.close()
        assert names == set(info["row_counts"])
        assert all(path.startswith("hidden/") for path in info["hidden"].values())
    lineage = pq.read_table(folder / databases["ehrsql2024/mimic_iv"]["hidden"]["lineage"])
    assert lineage.num_rows == sum(n for t, n in databases["ehrsql2024/mimic_iv"]["row_counts"].items() if t != "cost")
    assert not list((folder / "db").rglob("*.parquet"))


def test_build_exports_valid_fhir_resources(demo_build):
    folder = demo_build["folder"]
    fhir = json.loads((folder / "manifest.json").read_text())["fhir"]
    assert fhir["counts"]["Patient"] == 94 and fhir["counts"]["Encounter"] > 94
    # every resource of a seeded sample of patients, sized to the view's limit (the demo's every resource: the
    # test_fhir_* tests)
    assert 0 < fhir["validated_patients"] < 94 and 0 < fhir["validated"] < sum(fhir["counts"].values())
    with gzip.open(folder / fhir["files"]["Patient"], "rt") as lines:
        patients = [json.loads(line) for line in lines]
    assert len(patients) == 94 and all(p["resourceType"] == "Patient" for p in patients)
    assert [p["id"] for p in patients] == sorted(p["id"] for p in patients)
    resources = duckdb.connect(str(folder / fhir["files"]["duckdb"]), read_only=True)
    try:
        by_type = dict(resources.execute("select resource_type, count(*) from resources group by 1").fetchall())
    finally:
        resources.close()
    assert by_type == fhir["counts"]


def test_strict_checksums_fails_on_the_reconstructed_file_and_keeps_latest(demo_build, cli_env):
    data_dir = demo_build["data_dir"]
    before = os.readlink(data_dir / "benchmarks" / "latest")
    result = run_cli(["build", "--data-dir", str(data_dir), "--strict-checksums"], cli_env)
    assert result.returncode == 1
    line = error_line(result.stderr)
    assert "chartevents.csv.gz" in line and "SHA256SUMS.txt" in line and "expected" in line
    assert os.readlink(data_dir / "benchmarks" / "latest") == before
    assert not list((data_dir / "benchmarks").glob("*.tmp"))


def test_missing_directory_is_a_one_line_error(demo_build, cli_env, tmp_path):
    data_dir = demo_build["data_dir"]
    before = sorted(p.name for p in (data_dir / "benchmarks").iterdir())
    missing = tmp_path / "no-such-release"
    result = run_cli(["build", "--data-dir", str(data_dir), "--mimic-iv-dir", str(missing)], cli_env)
    assert result.returncode == 2  # refused before any stage (or Prefect) started
    line = error_line(result.stderr)
    assert str(missing) in line and "does not exist" in line and line.startswith("ehrbench: error: --mimic-iv-dir")
    assert sorted(p.name for p in (data_dir / "benchmarks").iterdir()) == before


def test_truncated_local_file_is_rejected(demo_build, cli_env, mimic_demo_dir, tmp_path):
    broken = tmp_path / "mimic"
    for source in mimic_demo_dir.rglob("*"):
        if source.is_file():
            target = broken / source.relative_to(mimic_demo_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source)
    labevents = broken / "hosp" / "labevents.csv.gz"
    labevents.unlink()
    labevents.write_bytes((mimic_demo_dir / "hosp" / "labevents.csv.gz").read_bytes()[:200_000])
    data_dir = demo_build["data_dir"]
    before = os.readlink(data_dir / "benchmarks" / "latest")
    result = run_cli(["build", "--data-dir", str(data_dir), "--mimic-iv-dir", str(broken)], cli_env)
    assert result.returncode == 1
    line = error_line(result.stderr)
    assert "labevents.csv.gz" in line and "truncated" in line
    assert os.readlink(data_dir / "benchmarks" / "latest") == before


def test_download_whose_bytes_do_not_match_fails_after_one_retry(demo_build, cli_env, mimic_demo_dir):
    """The real downloader against a local HTTP server serving the demo folder: its chartevents is a
    reconstruction, so the bytes never match SHA256SUMS.txt."""
    from tests.unit.fakes import FileServer

    server = FileServer(mimic_demo_dir).start()
    try:
        env = {k: v for k, v in cli_env.items() if k != "EHRBENCH_MIMIC_IV_DIR"}
        env["EHRBENCH_MIMIC_IV_URL"] = server.url
        data_dir = demo_build["data_dir"]
        before = os.readlink(data_dir / "benchmarks" / "latest")
        result = run_cli(["build", "--data-dir", str(data_dir)], env)
    finally:
        server.stop()
    assert result.returncode == 1
    line = error_line(result.stderr)
    assert "icu/chartevents.csv.gz" in line and "downloaded twice" in line and "expected" in line
    assert len(server.gets("icu/chartevents.csv.gz")) == 2
    downloaded = data_dir / "raw" / "mimic-iv-demo-2.2"
    assert (downloaded / "hosp" / "admissions.csv.gz").read_bytes() == (
        mimic_demo_dir / "hosp" / "admissions.csv.gz").read_bytes()
    assert not (downloaded / "icu" / "chartevents.csv.gz").exists()
    assert os.readlink(data_dir / "benchmarks" / "latest") == before


def test_build_grounds_the_ehrsql2024_questions_in_fhir_resources(demo_build, mimic_demo_dir):
    if not EHRSQL_2024.is_dir():
        pytest.skip(f"EHRSQL-2024 data not found at {EHRSQL_2024}")
    folder = demo_build["folder"]
    truth = json.loads((folder / "manifest.json").read_text())["fhir"]["ground_truth"]["ehrsql2024_valid"]
    single = truth["patient_scoped"]
    assert single["questions"] == 592  # answerable questions with a {patient_id} slot in the valid split
    assert single["mapped"] / single["questions"] > 0.9 and single["unmapped"] == 0
    assert truth["all"]["questions"] == 931 and "reads cost" in truth["unmapped_reasons"]
    check = truth["grounding_check"]
    assert check["checked"] > 200 and check["disagreed"] == 0, check["disagreements"][:5]

    rows = pq.read_table(folder / truth["file"]).to_pylist()
    by_question = {row["question_id"]: row for row in rows}
    raw = duckdb.connect()

    def csv(name: str) -> str:
        return f"read_csv('{mimic_demo_dir}/{name}.csv.gz', header=true)"

    # "When did patient 10011398 get admitted to the hospital for the last time?" (a finished admission)
    (hadm,) = raw.execute(f"select hadm_id from {csv('hosp/admissions')} where subject_id = 10011398 "
                          f"and dischtime is not null order by admittime desc limit 1").fetchone()
    assert by_question["a5253b5b458dbf9c057541b0"]["resource_ids"] == [mimic_fhir_id("Encounter", hadm)]
    # "How many days have passed since patient 10018081 received a basophils laboratory test for the first time
    # during this hospital encounter?" -- the current encounter is the admission the ehrsql2024 database leaves open
    sqlite = sqlite3.connect(folder / "db" / "ehrsql2024" / "mimic_iv.sqlite")
    (current,) = sqlite.execute("select hadm_id from admissions where subject_id = 10018081 and dischtime is null")
    sqlite.close()
    (labevent,) = raw.execute(
        f"select labevent_id from {csv('hosp/labevents')} where hadm_id = ? and valuenum is not null "
        f"and itemid in (select itemid from {csv('hosp/d_labitems')} where lower(label) = 'basophils') "
        f"order by charttime limit 1", [current[0]]).fetchone()
    grounding = by_question["b037cad3311b5d427cda5306"]
    assert grounding["resource_ids"] == [mimic_fhir_id("ObservationLabevents", labevent)]
    assert grounding["resource_types"] == ["Observation"]
    # "What's the gender of patient 10014078?" -> the Patient
    assert by_question["cc2d0e8abf70d2897312faf2"]["resource_ids"] == [mimic_fhir_id("Patient", 10014078)]
    # every id is a resource of the build
    resources = duckdb.connect(str(folder / "fhir" / "resources.duckdb"), read_only=True)
    try:
        ids = {i for row in rows for i in row["resource_ids"]}
        found = resources.execute("select count(*) from resources where id in (select unnest(?))",
                                  [sorted(ids)]).fetchone()[0]
    finally:
        resources.close()
    assert found == len(ids) > 500


def test_build_generates_validated_questions_in_the_published_formats(demo_build):
    from ehrbench.ehrsql.scoring import answers_match
    from ehrbench.questions.templates import load_templates

    folder = demo_build["folder"]
    entry = json.loads((folder / "manifest.json").read_text())["questions"]
    assert entry["quarantined"] <= 0.05 * entry["generated"]
    assert entry["validation"]["data_docs"] and (folder / "reports" / "gx" / "index.html").is_file()
    assert (folder / "quarantine" / "questions.parquet").is_file()
    rows = pq.read_table(folder / "questions" / "questions.parquet").to_pylist()
    assert len({r["question_id"] for r in rows}) == len(rows) == entry["kept"]
    assert not [r["question"] for r in rows if "{" in r["question"] or "}" in r["question"]]

    # every answerable template is asked of the demo databases, unless the demo lacks its data (eICU's
    # vitalperiodic is absent): then its values query finds nothing
    templates = load_templates()
    for database, profile in (("mimic_iv", "ehrsql2024"), ("eicu", "ehrsql_eicu")):
        asked = {r["template_id"] for r in rows if r["suite"] == "ehrsql" and r["db"] == database}
        missing = [t for t in templates if t.answerable and t.asks(database) and t.id not in asked]
        con = duckdb.connect(str(folder / "db" / profile / f"{database}.duckdb"), read_only=True)
        try:
            with_data = [t.id for t in missing
                         if con.execute(f"select count(*) from ({t.values[database]})").fetchone()[0]]
        finally:
            con.close()
        assert with_data == [], f"{database}: templates with candidate values but no valid question: {with_data}"
        assert len(missing) < (1 if database == "mimic_iv" else 12), [t.id for t in missing]
    ehrsql = [r for r in rows if r["suite"] == "ehrsql" and r["db"] == "mimic_iv"]
    unanswerable = [r for r in ehrsql if not r["is_answerable"]]
    assert 0.1 < len(unanswerable) / len(ehrsql) < 0.3
    assert len({r["template_id"] for r in unanswerable}) >= 40
    assert all(r["gold_sql_duckdb"] is None and r["answer"] is None for r in unanswerable)

    # the exported EHRSQL-2024 files: their gold SQL, run on the exported SQLite database, gives their answers
    export = folder / "exports" / "ehrsql2024"
    labels = json.loads((export / "label.json").read_text())
    answers = json.loads((export / "answer.json").read_text())
    assert set(labels) == {r["question_id"] for r in ehrsql}
    sqlite = sqlite3.connect(folder / "db" / "ehrsql2024" / "mimic_iv.sqlite")
    try:
        wrong = [qid for qid, sql in labels.items()
                 if sql != "null" and not answers_match(sqlite.execute(sql).fetchall(), answers[qid])]
    finally:
        sqlite.close()
    assert not wrong, wrong[:5]

    # the FHIR suite: single-patient MIMIC-IV questions with resource ids of the build and the current time
    fhir = [r for r in rows if r["suite"] == "fhir"]
    assert len(fhir) > 100
    assert all(r["context"] == "Assume the current time is 2100-12-31 23:59:00." for r in fhir)
    resources = duckdb.connect(str(folder / "fhir" / "resources.duckdb"), read_only=True)
    try:
        ids = sorted({i for r in fhir for i in r["fhir_ids"]})
        found = resources.execute("select count(*) from resources where id in (select unnest(?))", [ids]).fetchone()[0]
    finally:
        resources.close()
    assert found == len(ids) > 100
    gender = [r for r in fhir if r["template_id"] == "patient_gender"]
    assert gender and all(r["fhir_ids"] == [mimic_fhir_id("Patient", json.loads(r["slot_values"])["patient_id"])]
                          for r in gender)


def test_build_writes_chatqa_tasks_that_reproduce_their_answers_on_the_renamed_databases(demo_build):
    from ehrbench.ehrsql.scoring import format_answer
    from ehrbench.questions.chatqa import demo_coverage, load_lay_terms

    folder = demo_build["folder"]
    rows = pq.read_table(folder / "questions" / "questions.parquet").to_pylist()
    chatqa = [r for r in rows if r["suite"] == "chatqa"]
    kinds = {(r["db"], json.loads(r["extra"])["task_type"]) for r in chatqa}
    assert kinds == {("mimic_iv", "incre"), ("mimic_iv", "adapt"), ("eicu", "incre"), ("eicu", "adapt")}
    exported = 0
    for database in ("mimic_iv", "eicu"):
        sqlite = sqlite3.connect(folder / "db" / "renamed" / f"{database}.sqlite")
        try:
            for kind in ("incre", "adapt"):
                tasks = json.loads((folder / "exports" / "chatqa" / f"{database}_{kind}.json").read_text())
                assert tasks and all(set(t) == {"task_id", "task_type", "db_id", "instruction", "gold_sql",
                                                "gold_answer"} and t["task_type"] == kind for t in tasks)
                for task in tasks:  # EHR-ChatQA's gold: its SQL on the renamed database gives its answer
                    assert format_answer(sqlite.execute(task["gold_sql"]).fetchall()) == format_answer(
                        task["gold_answer"]), task["task_id"]
                exported += len(tasks)
        finally:
            sqlite.close()
    assert exported == len(chatqa)
    # every curated lay term, brand and alternative lab names values of the demo databases
    report = demo_coverage(load_lay_terms(), {database: folder / "db" / profile / f"{database}.duckdb"
                                              for profile, database in (("ehrsql2024", "mimic_iv"),
                                                                        ("ehrsql_eicu", "eicu"))})
    assert report.unmatched == []


def test_build_writes_verified_audit_tasks_with_hidden_cluster_gold(demo_build, tmp_path):
    from ehrbench.dq.row_ids import row_id
    from ehrbench.dq.score import LABEL_COLUMNS, score_task

    folder, data_dir = demo_build["folder"], demo_build["data_dir"]
    manifest = json.loads((folder / "manifest.json").read_text())
    entry = manifest["dq"]
    recipes = [task["id"] for task in entry["recipe_book"]["tasks"]]
    expected = sorted([*recipes, *(f"{r}_clues" for r in recipes)])
    assert sorted(p.name for p in (folder / "dq").iterdir()) == expected
    assert all(row["oracle_passed"] for row in entry["calibration"])
    # the rule-based auditor finds every rule-visible family on the real extract, and by design no demographic
    # contradiction (that takes clinical reasoning)
    recall = {row["task"]: row["auditor_recall_by_family"] for row in entry["calibration"]}
    for family in ("impossible_values", "inconsistency", "temporal_violation", "orphan_reference"):
        assert recall[family] == {family: 1.0}
    assert recall["demographic_contradiction"] == {"demographic_contradiction": 0.0}
    assert manifest["stages"]["dq"]["seconds"] > 0

    listing = run_cli(["dq", "tasks", "--data-dir", str(data_dir)], {**os.environ, "DO_NOT_TRACK": "1"})
    assert listing.returncode == 0, listing.stderr
    listed = [line.split("\t") for line in listing.stdout.splitlines()]
    assert sorted(row[0] for row in listed) == expected
    assert {row[0]: int(row[1]) for row in listed}["combined"] == next(
        t["clusters"] for t in entry["tasks"] if t["task_id"] == "combined")

    # the reference auditor from the command line: its submission scores as the build's calibration did
    flagged = tmp_path / "auditor.csv"
    audited = run_cli(["dq", "audit", str(folder / "dq" / "inconsistency"), "--out", str(flagged)],
                      {**os.environ, "DO_NOT_TRACK": "1"})
    assert audited.returncode == 0 and flagged.is_file(), audited.stderr
    scored = json.loads(run_cli(["dq", "score", str(folder / "dq" / "inconsistency"), str(flagged)],
                                {**os.environ, "DO_NOT_TRACK": "1"}).stdout)
    calibrated = next(row for row in entry["calibration"] if row["task"] == "inconsistency")
    assert (round(scored["recall"], 4), scored["flagged_rows"]) == (calibrated["auditor_recall"],
                                                                    calibrated["auditor_flagged_rows"])

    for task in expected:
        task_dir = folder / "dq" / task
        labels = pq.read_table(task_dir / "gold" / "labels.parquet").to_pylist()
        assert labels and set(LABEL_COLUMNS) <= set(labels[0])
        tables = {}
        for path in sorted((task_dir / "data").glob("*.csv.gz")):
            text = gzip.decompress(path.read_bytes()).decode()
            # no source dataset is named in an agent-visible path, header or cell
            assert not any(name in (path.name + text).lower() for name in ("mimic", "physionet", "eicu")), path
            rows = list(csv.DictReader(text.splitlines()))
            tables[path.name.removesuffix(".csv.gz")] = {row["_row_id"]: row for row in rows}
        instruction = (task_dir / "instruction.md").read_text().lower()
        assert not any(name in instruction for name in ("mimic", "physionet", "eicu"))
        assert ("sub-types" in instruction) == task.endswith("_clues")
        for label in labels:
            row = tables[label["table"]][label["row_id"]]  # every labelled row is in the written data
            if label["role"] == "evidence":
                continue
            assert row[label["field"]] == (label["corrupted_value"] or ""), label
            if label["role"] == "corrupted":
                # the id is the hash of the pristine row: the row with its original value restored (a repeated
                # identical row has its occurrence number appended)
                pristine = {**row, label["field"]: label["original_value"] or ""}
                values = [pristine[c] for c in row if c != "_row_id"]
                ids = {row_id(label["table"], values), *(row_id(label["table"], [*values, n]) for n in range(2, 5))}
                assert label["row_id"] in ids, label

        oracle = tmp_path / f"{task}.csv"
        oracle.write_text("table,_row_id\n" + "".join(f"{x['table']},{x['row_id']}\n" for x in labels))
        assert score_task(task_dir, oracle).passed, task  # `dq score` itself is run above and below
    garbage = tmp_path / "garbage.csv"
    garbage.write_bytes(b"\x00\xff not a csv")
    scored = run_cli(["dq", "score", str(folder / "dq" / "combined"), str(garbage)], {**os.environ})
    assert scored.returncode == 0
    assert json.loads(scored.stdout)["passed"] is False


def test_evaluate_the_baseline_agents_on_every_suite_and_resume(demo_build, cli_env):
    data_dir = demo_build["data_dir"]
    args = ["evaluate", "--agent", "oracle", "--agent", "abstain", "--trials", "2", "--limit", "15", "--run-id",
            "it", "--data-dir", str(data_dir)]
    result = run_cli(args, cli_env)
    assert result.returncode == 0, result.stderr[-3000:]
    folder = Path(result.stdout.strip().splitlines()[-1])
    assert folder == data_dir / "results" / "run_id=it"
    parts = sorted(folder.glob("part-*.parquet"))
    trials = duckdb.sql(f"select * from read_parquet('{folder}/*.parquet', hive_partitioning = true)").df()
    # 15 tasks of each question suite and of noteqa + all 12 audit, 4 conversion and 3 event-modelling tasks, 2 agents,
    # 2 trials
    assert len(trials) == 2 * 2 * (4 * 15 + 12 + 4 + 3) and set(trials["run_id"]) == {"it"}
    assert (trials["status"] == "completed").all()
    oracle, abstain = trials[trials["agent"] == "oracle"], trials[trials["agent"] == "abstain"]
    assert (oracle["reward"] == 1.0).all()  # the harness's self-check: gold scores 100 % on every suite
    worked = ["dq", "noteqa", "meds_conversion", "event_modelling"]  # no abstention is right there
    questions = abstain[~abstain["suite"].isin(worked)]
    assert ((questions["reward"] == 1.0) == ~questions["is_answerable"].astype(bool)).all()
    # every note has an answer; an untouched workspace fails its verifier
    assert (abstain.loc[abstain["suite"].isin(worked), "reward"] == 0.0).all()

    metrics = run_cli(["metrics", "--run-id", "it", "--json", "--data-dir", str(data_dir)], cli_env)
    assert metrics.returncode == 0, metrics.stderr
    rows = {(r["agent"], r["suite"]): r for r in map(json.loads, metrics.stdout.splitlines())}
    suites = ("ehrsql", "chatqa", "fhir", "dq", "noteqa", "meds_conversion", "event_modelling")
    assert {suite for _, suite in rows} == set(suites)
    assert all(rows[("oracle", s)]["success_rate"] == 1.0 and rows[("oracle", s)]["pass^2"] == 1.0 for s in suites)
    assert rows[("oracle", "ehrsql")]["RS(N)"] == 1.0 and rows[("oracle", "fhir")]["retrieval_recall"] == 1.0
    assert rows[("abstain", "ehrsql")]["F1_ans"] == 0.0

    # the run's dashboard (evaluate-agents' last stage) shows these trials' values in a real browser
    index = Path(cli_env["EHRBENCH_REPORT_DIR"]) / "index.html"
    expected = trials.groupby(["suite", "agent"])["reward"].mean().to_dict()
    with chromium_page() as page:
        page.goto(index.as_uri())
        for (suite, agent), value in expected.items():
            cell = page.locator(f'table.leaderboard[data-suite="{suite}"] tr.agent-row[data-agent="{agent}"] '
                                'td[data-metric="success_rate"]')
            assert float(cell.get_attribute("data-value")) == round(value, 6), (suite, agent)  # data-value: 6 places
        abstain_dq = 'table.leaderboard[data-suite="dq"] tr.agent-row[data-agent="abstain"]'
        page.locator(f"{abstain_dq} a.failing-link").first.click()
        page.locator("table.failing a.task-link").first.click()
        page.locator("details.transcript > summary").first.click()
        assert "flagged nothing" in page.locator("details.transcript").first.inner_text()
        assert page.errors == [] and all(url.startswith("file://") for url in page.requested)
        screenshot(page, "report-demo-dq-task")

    again = run_cli(args, cli_env)  # same run id: every trial is done, nothing runs again
    assert again.returncode == 0, again.stderr[-3000:]
    assert sorted(folder.glob("part-*.parquet")) == parts

    # another published build (this one's files under another build id): resuming the run on it would mix gold
    assert set(trials["build_id"]) == {demo_build["folder"].name}
    other = data_dir / "benchmarks" / "20990101T000000Z"
    other.mkdir()
    try:
        for entry in demo_build["folder"].iterdir():
            if entry.name != "manifest.json":
                (other / entry.name).symlink_to(entry)
        manifest = json.loads((demo_build["folder"] / "manifest.json").read_text())
        (other / "manifest.json").write_text(json.dumps({**manifest, "build_id": other.name}))
        mixed = run_cli([*args, "--build", other.name], cli_env)
    finally:
        shutil.rmtree(other)
    assert mixed.returncode == 1 and "was made on build" in error_line(mixed.stderr), mixed.stderr[-2000:]
    assert sorted(folder.glob("part-*.parquet")) == parts


def test_evaluate_an_llm_agent_through_a_real_model_server(demo_build, cli_env, prefect_api_url):
    """`--agent llm:<model>@<base_url>` over HTTP: a scripted model that follows the gold (tests/gold_policy.py)
    drives every suite through the LLM machinery — prompts, tool calls, tools and sandbox, the simulated user, its
    verifier and the validator, answer SQL run by the harness, the FHIR answer match — so it must score 100 %; and
    the run throttles the endpoint with a Prefect global concurrency limit."""
    from prefect.blocks.system import Secret

    from tests.gold_policy import GoldPolicy
    from tests.llm_servers import OpenAIServer

    data_dir = demo_build["data_dir"]
    build_dir = (data_dir / "benchmarks" / "latest").resolve()
    Secret(value="sk-from-a-secret-block").save("ehrbench-test-key", overwrite=True)  # on the module's server
    with OpenAIServer() as server:
        server.respond(GoldPolicy(build_dir))
        result = run_cli(["evaluate", "--agent", f"llm:scripted@{server.base_url}", "--agent-option",
                          "max_retries=0", "--agent-option", "api_key_secret=ehrbench-test-key", "--concurrency", "2",
                          "--limit", "4", "--run-id", "llm", "--data-dir", str(data_dir)], cli_env)
        requests = len(server.requests)
        keys = {r.headers.get("authorization") for r in server.requests
                if r.body["messages"][0]["content"].startswith(("You answer", "You are a database", "You are audit",
                                                                      "Instruction:"))}
    assert result.returncode == 0, result.stderr[-3000:]
    folder = Path(result.stdout.strip().splitlines()[-1])
    trials = duckdb.sql(f"select * from read_parquet('{folder}/*.parquet')").df()
    # 4 tasks of each suite but event_modelling (3), and 4 noteqa questions in two formats
    assert len(trials) == 4 * 5 + 3 + 4 and (trials["status"] == "completed").all(), trials[["suite", "error"]]
    assert (trials["reward"] == 1.0).all(), trials.loc[trials["reward"] != 1.0, ["suite", "task_id", "answer"]]
    assert set(trials["model"]) == {f"openai:scripted@{server.base_url}"}
    assert set(trials["sandbox"]) == {"bubblewrap"}  # every row says how its agent's SQL and Python were isolated
    tools = trials[trials["suite"] != "noteqa"]  # EHRNoteQA's protocol is one reply, no tools
    assert (tools["tool_calls"] >= 1).all() and (trials["input_tokens"] > 0).all() and requests >= 2 * len(tools)
    assert keys == {"Bearer sk-from-a-secret-block"}  # the agent's key came from the Prefect Secret block
    assert "sk-from-a-secret-block" not in "".join(trials["transcript"]) + result.stdout + result.stderr
    chatqa = trials[trials["suite"] == "chatqa"]
    assert (chatqa["user_turns"] >= 1).all()
    assert all("user_attempts" in t for t in chatqa["transcript"])
    fhir = trials[trials["suite"] == "fhir"]
    assert (fhir["retrieval_recall"].dropna() == 1.0).all() and (fhir["answer_judge"].dropna() == "match").all()

    with httpx.Client(base_url=prefect_api_url) as api:
        port = server.base_url.split(":")[2].split("/")[0]
        limit = api.get(f"/v2/concurrency_limits/llm-endpoint:127.0.0.1:{port}").raise_for_status().json()
    assert limit["limit"] == 2 and limit["active_slots"] == 0


def test_evaluate_on_a_dask_cluster(demo_build, cli_env):
    """`--dask-address`: the trials run in the worker processes of a (local) Dask cluster."""
    from distributed import LocalCluster

    data_dir = demo_build["data_dir"]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        result = run_cli(["evaluate", "--agent", "oracle", "--suite", "ehrsql", "--suite", "dq", "--limit", "3",
                          "--run-id", "dask", "--dask-address", cluster.scheduler_address, "--data-dir", str(data_dir)],
                         cli_env)
    assert result.returncode == 0, result.stderr[-3000:]
    trials = duckdb.sql(f"select * from read_parquet('{data_dir}/results/run_id=dask/*.parquet')").df()
    assert len(trials) == 6 and (trials["reward"] == 1.0).all()


def test_a_transient_endpoint_failure_is_retried_by_prefect_and_a_lasting_one_recorded(demo_build, prefect_api_url):
    """503 after the SDK's own retries (none here): the trial is retried as a Prefect task retry and then scores;
    an endpoint that keeps failing leaves an error row (re-run on resume), and the run itself completes."""
    from flows.evaluate import evaluate_agents
    from tests.gold_policy import GoldPolicy
    from tests.llm_servers import OpenAIServer, Reply

    data_dir = demo_build["data_dir"]
    build_dir = (data_dir / "benchmarks" / "latest").resolve()
    common = dict(suites=["ehrsql"], limit=1, transient_retries=1, retry_delay_s=0, data_dir=str(data_dir),
                  agent_options={"max_retries": 0}, report=False)  # in-process: would render into reports/site/
    with OpenAIServer() as server:
        server.error(503)
        server.respond(GoldPolicy(build_dir))
        folder = evaluate_agents(agents=[f"llm:scripted@{server.base_url}"], run_id="transient", **common)
        (row,) = duckdb.sql(f"select status, reward from read_parquet('{folder}/*.parquet')").fetchall()
        assert row == ("completed", 1.0) and len(server.requests) == 1 + 2  # the 503, then table_search + submit
    with OpenAIServer() as server:
        server.forever(Reply(text="overloaded", status=503))
        folder = evaluate_agents(agents=[f"llm:scripted@{server.base_url}"], run_id="lasting", **common)
        (row,) = duckdb.sql(f"select status, error from read_parquet('{folder}/*.parquet')").fetchall()
        assert row[0] == "error" and row[1].startswith("TransientTrialError") and "503" in row[1]
        assert len(server.requests) == 2  # the first try and one Prefect retry
    with OpenAIServer() as server:
        server.forever(Reply(text="invalid api key", status=401))  # refused: no retry at all
        folder = evaluate_agents(agents=[f"llm:scripted@{server.base_url}"], run_id="refused", **common)
        (row,) = duckdb.sql(f"select status, error from read_parquet('{folder}/*.parquet')").fetchall()
        assert row[0] == "error" and row[1].startswith("ChatError") and len(server.requests) == 1


def test_a_dashboard_stage_the_api_keeps_refusing_leaves_complete_results_and_a_rerun_finishes(
        demo_build, prefect_api_url, tmp_path, monkeypatch):
    """The Prefect API answers 503 "database is locked" whenever the dashboard stage starts: the stage's retries run
    out, the flow fails saying the trials are complete and how to finish; every trial is in the parquet parts. The
    same run id again runs no trial and renders the dashboard."""
    import httpx

    import flows.evaluate as evaluate_flow
    import flows.prefect_api as prefect_api
    from flows.evaluate import DashboardNotRendered, evaluate_agents

    data_dir = demo_build["data_dir"]
    monkeypatch.setattr(prefect_api, "FIRST_DELAY_S", 0.01)
    monkeypatch.setattr(prefect_api, "ATTEMPTS", 3)
    render, attempts = evaluate_flow.render_report, []

    def locked_api(**parameters):
        attempts.append(parameters)
        request = httpx.Request("POST", f"{prefect_api_url}/flow_runs/")
        raise httpx.HTTPStatusError("Server error '503 Service Unavailable'", request=request,
                                    response=httpx.Response(503, request=request, text="database is locked"))

    monkeypatch.setattr(evaluate_flow, "render_report", locked_api)
    run = dict(agents=["oracle"], suites=["ehrsql", "dq"], limit=3, run_id="dashboard-refused",
               data_dir=str(data_dir), report_dir=str(tmp_path / "site"))
    with pytest.raises(DashboardNotRendered, match=r"trials of run dashboard-refused are complete .*"
                                                   r"make report RUN_ID=dashboard-refused"):
        evaluate_agents(**run)
    assert len(attempts) == 3 and not (tmp_path / "site").exists()
    parts = data_dir / "results" / "run_id=dashboard-refused" / "part-*.parquet"
    trials = duckdb.sql(f"select count(*), min(status) from read_parquet('{parts}')").fetchone()
    assert trials == (6, "completed")  # 3 ehrsql + 3 dq tasks, one trial each

    monkeypatch.setattr(evaluate_flow, "render_report", render)
    planted = data_dir / "results" / "run_id=dashboard-refused" / "part-00099-deadbeef.parquet"
    os.mkfifo(planted)  # a FIFO named like a part: the resume must set it aside, not hang on it
    warnings: list[str] = []  # the flow run's own log (Prefect's logging setup leaves caplog's handler out)
    keep = logging.Handler(logging.WARNING)
    keep.emit = lambda record: warnings.append(record.getMessage())
    run_log = logging.getLogger("prefect.flow_runs")
    run_log.addHandler(keep)
    try:
        evaluate_agents(**run)
    finally:
        run_log.removeHandler(keep)
    assert duckdb.sql(f"select count(*) from read_parquet('{parts}')").fetchone()[0] == 6  # nothing ran again
    assert not planted.exists() and (planted.parent / "quarantine" / planted.name).is_fifo()
    assert any("moved 1 unreadable result file(s)" in line and planted.name in line for line in warnings), warnings
    assert "dashboard-refused" in (tmp_path / "site" / "index.html").read_text()


def test_a_killed_evaluation_resumes_without_losing_finished_trials(demo_build, cli_env):
    """SIGKILL in the middle of a batch: the trials that had ended are recovered from their spilled rows, not run
    again; the resumed run completes the rest."""
    from tests.gold_policy import GoldPolicy
    from tests.llm_servers import OpenAIServer

    data_dir = demo_build["data_dir"]
    build_dir = (data_dir / "benchmarks" / "latest").resolve()
    pending = data_dir / "results" / "run_id=killed" / "pending"
    policy = GoldPolicy(build_dir)

    def slow(request):
        time.sleep(0.5)
        return policy(request)

    with OpenAIServer() as server:
        server.respond(slow)
        args = ["evaluate", "--agent", f"llm:scripted@{server.base_url}", "--agent-option", "max_retries=0",
                "--suite", "ehrsql", "--limit", "6", "--concurrency", "1", "--run-id", "killed",
                "--data-dir", str(data_dir)]
        log = data_dir / "killed-run.log"
        with log.open("w") as output:
            process = subprocess.Popen([EHRBENCH, *args], env=cli_env, stdout=output, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        deadline = time.monotonic() + 240
        while len(list(pending.glob("*.parquet"))) < 2:
            assert process.poll() is None and time.monotonic() < deadline, \
                f"the run ended before it could be killed:\n{log.read_text()[-3000:]}"
            time.sleep(0.05)
        os.killpg(process.pid, 9)
        process.wait()
        spilled = len(list(pending.glob("*.parquet")))
        assert not list(pending.parent.glob("part-*.parquet"))  # killed inside its only batch
        # The dead run's slot stays leased (the test server runs no reclaiming service): the resume revokes the
        # lease the dead run recorded in its run folder instead of waiting for it.
        leases = pending.parent / "slot-leases"
        assert len(list(leases.iterdir())) == 1
        before = len(server.requests)
        resumed = run_cli(args, cli_env)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert not list(leases.iterdir())  # released, and the resumed run's own lease given back at its end
        rerun_requests = len(server.requests) - before
    trials = duckdb.sql(f"select task_id, trial, status, reward from read_parquet('{pending.parent}/*.parquet')").df()
    assert len(trials) == 6 and not trials.duplicated(["task_id", "trial"]).any() and (trials["reward"] == 1.0).all()
    assert rerun_requests == 2 * (6 - spilled)  # two model calls per trial, none for the recovered ones
