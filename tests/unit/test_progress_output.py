"""What a person sees of a run: a line per stage with its counts, warnings once, a trial count that does not flood,
the closing summary of a build, and a build.log that keeps the details."""

from __future__ import annotations

import io
import logging
from datetime import UTC, datetime

import pytest
from rich.console import Console

from ehrbench.build_summary import STAGES, fhir_detail, ingest_detail, stage_line, summary_lines, summary_markdown
from ehrbench.manifest import InputFile, StageTiming
from ehrbench.manifest_parts import (
    AuditTaskEntry,
    ConversionTaskEntry,
    DqEntry,
    MedsEntry,
    MedsTimelineEntry,
    ModellingTaskEntry,
    QuestionsEntry,
)
from ehrbench.progress import ANNOUNCED, PROGRESS, TrialCount, log_to_file, report_trials, terminal_progress
from ehrbench.sources.checksums import Verification
from ehrbench.sources.ingest import IngestedFile, ReleaseIngest
from ehrbench.transform import DbtRun, NodeResult

from .test_publish import _manifest

# Prefect's run loggers also carry its API handler, which warns outside a run; these tests only read our handlers.
pytestmark = pytest.mark.filterwarnings("ignore:Logger 'prefect.*attempted to send logs")


def captured() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=200), out


def test_stage_lines_show_position_time_and_counts():
    assert stage_line("validate", 12.34, "2 suites") == "[3/10] validate     12.3 s  2 suites"
    assert stage_line("publish", 0.2, "x").startswith(f"[{len(STAGES)}/{len(STAGES)}] publish")


def test_the_fhir_line_counts_resources_and_the_published_questions_grounded():
    """The manifest's grounding entry (fhir.ground_truth.GroundingSummary.to_dict): a question is grounded when its
    gold SQL's rows map to resources (mapped) or it reads no rows (empty); unmapped ones are not."""
    entry = {"counts": {"Patient": 94, "Observation": 1000}, "files": {}, "validated": 1094,
             "ground_truth": {"ehrsql2024_valid": {"all": {"questions": 931, "mapped": 732, "empty": 52,
                                                            "unmapped": 147}}}}
    assert fhir_detail(entry) == ("1,094 resources of 2 types, 1,094 validated; EHRSQL-2024 valid questions "
                                  "grounded: 784 of 931")
    assert fhir_detail({**entry, "ground_truth": {}}) == "1,094 resources of 2 types, 1,094 validated"


def test_ingest_counts_tables_rows_and_what_was_not_verified():
    def file(table, verification, rows, action="loaded"):
        return IngestedFile("eicu", table, f"/raw/{table}.csv.gz", False, verification, None, None, rows, action)

    release = ReleaseIngest("eicu", "demo", "2.0.1", "/raw", "local", [
        file("patient", Verification.VERIFIED, 2520), file("lab", Verification.MISMATCH, 434_660, "unchanged"),
        file("vitalperiodic", Verification.ABSENT, 0, "absent")])
    # 2 tables present, 2,520 + 434,660 rows; the lab file was reused; one unverified, one absent
    assert ingest_detail([release]) == ("2 tables of eicu, 437,180 rows (1 unchanged, reused); 1 unverified, "
                                        "1 absent")


def test_the_terminal_shows_progress_lines_and_warnings_once_and_no_run_chatter():
    console, out = captured()
    run_log = logging.getLogger("prefect.flow_runs")
    run_log.setLevel(logging.INFO)
    with terminal_progress(console):
        PROGRESS.info("[1/10] ingest        3.0 s  41 tables")
        run_log.info("Beginning subflow run 'x' for flow 'ingest'")  # Prefect's chatter: not shown
        run_log.info("[1/10] ingest        3.0 s  41 tables", extra={ANNOUNCED: True})  # the run-log copy
        run_log.warning("eicu.lab: lab.csv.gz is UNVERIFIED\nsecond line")
        run_log.error("Encountered exception during execution")  # the stage line and the command's error say it
    PROGRESS.info("after the block: nobody listens")
    assert out.getvalue().splitlines() == ["[1/10] ingest        3.0 s  41 tables",
                                           "warning: eicu.lab: lab.csv.gz is UNVERIFIED"]


def test_trials_off_a_terminal_are_a_line_per_tenth():
    console, out = captured()
    with terminal_progress(console):
        for done in range(1, 201):
            report_trials(TrialCount(done, 200, failed=done // 100))
    lines = out.getvalue().splitlines()
    assert len(lines) == 10  # 20, 40, … 200 of 200
    assert lines[0] == "trials: 20 of 200 done (10%), 0 failed"
    assert lines[-1] == "trials: 200 of 200 done (100%), 2 failed"


def test_user_text_is_printed_as_it_is():
    console, out = captured()
    with terminal_progress(console):
        PROGRESS.info("agent llm:gemini:flash [bold]x[/bold]")
    assert out.getvalue().strip() == "agent llm:gemini:flash [bold]x[/bold]"


def test_build_log_keeps_every_run_line_once(tmp_path):
    run_log = logging.getLogger("prefect.task_runs")
    run_log.setLevel(logging.INFO)
    with log_to_file(tmp_path / "logs" / "build.log"):
        PROGRESS.info("[2/10] transform")
        run_log.info("[2/10] transform", extra={ANNOUNCED: True})
        run_log.info("dbt build --select staging: 192 nodes")
    run_log.info("after the block")
    text = (tmp_path / "logs" / "build.log").read_text()
    assert text.count("[2/10] transform") == 1 and "192 nodes" in text and "after the block" not in text


def test_the_build_summary_names_folder_checks_warnings_and_next_steps(tmp_path):
    manifest = _manifest("20261126T120000Z")
    manifest.inputs.append(InputFile(dataset="mimic_iv", table="chartevents", path="/raw/chartevents.csv.gz",
                                     required=False, status="unverified", verification="mismatch", sha256="b" * 64,
                                     expected_sha256="c" * 64, rows=668_862, action="loaded"))
    manifest.validation = {"staging_mimic_iv": {"evaluated": 40, "failed": []},
                           "staging_eicu": {"evaluated": 30, "failed": [{"x": 1}]}}
    manifest.dbt = {"build --select staging": {"pass": 165, "success": 25, "warn": 2},
                    "build --select fhir": {"pass": 82, "success": 15}}
    manifest.questions = QuestionsEntry(by_suite={"ehrsql/mimic_iv": 922, "ehrsql/eicu": 795, "fhir/mimic_iv": 528,
                                                  "chatqa/mimic_iv": 254}, quarantined=3)
    manifest.dq = DqEntry(tasks=[AuditTaskEntry(task_id=f"t{i}", recipe="r", variant="base", folder=f"dq/t{i}",
                                                clusters=5) for i in range(12)])
    manifest.meds = MedsEntry(timelines={"raw": MedsTimelineEntry(subjects=100, events=1_034_522),
                                         "shifted": MedsTimelineEntry(subjects=94, events=524_093)},
                              conversion_tasks=[ConversionTaskEntry(task_id=f"c{i}") for i in range(4)],
                              modelling_tasks=[ModellingTaskEntry(task_id=f"m{i}") for i in range(3)])
    folder = tmp_path / "benchmarks" / manifest.build_id
    lines = summary_lines(manifest, folder, tmp_path / "logs" / manifest.build_id)
    text = "\n".join(lines)
    assert lines[0].startswith(f"Build {manifest.build_id} published")
    assert f"folder     {folder}" in text
    assert ("1,717 ehrsql, 528 fhir, 254 chatqa, 12 dq tasks, 4 meds_conversion and 3 event_modelling tasks; "
            "3 questions quarantined") in text
    assert "dbt 289 nodes (287 ok, 2 warn); GX 69/70 expectations met" in text
    assert "meds/raw/ (100 subjects, 1,034,522 events), meds/shifted/ (94 subjects, 524,093 events)" in text
    assert "1 input files do not match SHA256SUMS.txt (unverified): mimic_iv.chartevents" in text
    assert lines[-4] == "Next:" and "ehrbench evaluate" in lines[-3] and "make report" in lines[-2]
    assert len(lines) <= 15

    started = datetime(2026, 11, 26, 12, tzinfo=UTC)
    manifest.stages = {"ingest": StageTiming(started_at=started, seconds=4.04, cpu_seconds=3.46),
                       "fhir": StageTiming(started_at=started, seconds=7.2)}  # a build from before CPU was recorded
    markdown = summary_markdown(manifest, folder, {"questions: questions": "http://ui/artifacts/key/questions"})
    assert markdown.startswith(f"# Build {manifest.build_id} published")
    assert "| stage | time | CPU |" in markdown
    assert "| ingest | 4.0 s | 3.5 s |" in markdown and "| fhir | 7.2 s | – |" in markdown
    assert "- [questions: questions](http://ui/artifacts/key/questions)" in markdown
    assert "| folder | " in markdown and "`make report`" in markdown


def test_a_dbt_run_in_one_line_and_a_line_per_warning():
    run = DbtRun(("build", "--select", "staging"), (
        NodeResult("model.ehrbench.stg_a", "model", "success", 1.0, None),
        NodeResult("test.ehrbench.not_null_a_id.1e1de12f7e", "test", "pass", 0.5, None),
        NodeResult("test.ehrbench.not_empty_b.fed9190299", "test", "warn", 0.25, "Got 1 result, configured to warn")))
    # models succeed and tests pass: both "ok"; 1.0 + 0.5 + 0.25 s
    assert run.describe() == "dbt build --select staging: 3 nodes (2 ok, 1 warn) in 1.8 s"
    assert run.warnings() == ["dbt test not_empty_b warned: Got 1 result, configured to warn"]
