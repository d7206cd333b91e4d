"""build-benchmark: the whole pipeline, one subflow per stage ([n/10] in each stage's module and progress line).

    [1/10] ingest (flows/ingest.py) → [2/10] transform (dbt staging) → [3/10] validate (GX, in a stage worker: this
      process never loads Great Expectations)
      → [4/10] databases (flows/databases.py): dbt builds the models the side stages read (audit extract, notes,
        MEDS events), copied into a file of their own; then the profiles, the FHIR resources and the rest; export
        (while fhir runs)
      → side by side in worker processes (flows/stage_workers.py; meds and fhir each in a fresh one), each reading
        the warehouse or that copy only:
          the side stages, from the copy, started as soon as it is made (while dbt builds the profiles):
            [7/10] dq (seeded errors with hidden cluster gold → verified task folders, calibration; flows/dq.py)
            [8/10] noteqa (synthetic or MIMIC-IV-Note's notes → note questions → GX, quarantine; flows/noteqa.py)
            [9/10] meds (MEDS files checked against the meds schemas, conversion and event-modelling tasks;
              flows/meds_export.py)
          once dbt has built the FHIR resources:
            [5/10] fhir (export, fhir.resources validation, resource-id ground truth; flows/fhir_view.py)
          once the databases are exported (FHIR ids from the FHIR models dbt built, while fhir exports them; ahead
          of fhir when both wait for a worker):
            [6/10] questions (templates → gold SQL executed → paraphrases → FHIR ids → GX, quarantine;
              flows/questions.py)
      → [10/10] publish (manifest.json, atomic rename, `latest`)

The stages write into the build's staging folder `<build_id>.tmp/` (what goes where: ehrbench.layout.BuildLayout).
Nothing is published unless every stage succeeds; a failed build leaves `latest` as it was.
Only one build runs at a time (the DuckDB warehouse has a single writer).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow

from ehrbench.build_summary import (
    databases_detail,
    dbt_detail,
    dq_detail,
    fhir_detail,
    ingest_detail,
    meds_detail,
    noteqa_detail,
    questions_detail,
    stage_line,
    summary_lines,
    summary_markdown,
    validation_detail,
)
from ehrbench.dq.recipes import load_recipes
from ehrbench.fhir.export import fhir_selection
from ehrbench.garbage_collection import collect_in_larger_batches
from ehrbench.layout import DataLayout
from ehrbench.manifest import StageTiming, assemble_manifest
from ehrbench.parameter_errors import one_line_errors
from ehrbench.profiles import BENCHMARK_DATABASES, ProfileVars
from ehrbench.progress import log_to_file
from ehrbench.publish import discard, new_build_id, remove_unfinished_builds, staging_dir
from ehrbench.settings import BuildParameters, DqSettings, Edition, NotesSource, QuestionSettings, default_data_dir
from ehrbench.stack.static_files import data_docs_link
from ehrbench.stage_clock import StageClock
from ehrbench.warehouse import build_lock, connect, table_row_counts
from flows.databases import build_profiles, build_side_stage_inputs, export_databases
from flows.dq import build_audit_tasks
from flows.fhir_view import build_fhir
from flows.ingest import ingest
from flows.meds_export import build_meds
from flows.noteqa import build_note_questions
from flows.prefect_api import announce, artifact_url, markdown_artifact, subflows_without_heartbeats
from flows.publish import publish_build
from flows.questions import build_questions
from flows.stage_workers import StageNotRun, StageOutcome, stage_workers
from flows.transform import transform
from flows.validate import validate
from flows.warm_up import FLOW_IMPORTS, WORKER_IMPORTS, import_in_background


@flow(name="build-benchmark", log_prints=True)
def build_benchmark(
    mimic_iv_dir: str | None = None,
    eicu_dir: str | None = None,
    strict_checksums: bool = False,
    seed: int = 0,
    mimic_iv_edition: Edition = "demo",
    eicu_edition: Edition = "demo",
    current_time: str | None = None,
    start_year: int | None = None,
    time_span: int | None = None,
    eicu_preset: str = "ehrchatqa",
    ehrsql2024_dir: str | None = None,
    mimic_iv_on_fhir: bool = True,
    mimic_iv_note_dir: str | None = None,
    notes: NotesSource | None = None,
    questions: QuestionSettings | None = None,
    dq: DqSettings | None = None,
    data_dir: str | None = None,
) -> str:
    """Build a benchmark from raw MIMIC-IV and eICU files; returns the published build folder.

    Source directories default to EHRBENCH_MIMIC_IV_DIR / EHRBENCH_EICU_DIR, else the release is
    downloaded from PhysioNet into data/raw/. `ehrsql2024_dir` (or EHRBENCH_EHRSQL2024_DIR): the published
    EHRSQL-2024 mimic_iv/ folder, whose valid questions then get FHIR resource-id ground truth. `mimic_iv_on_fhir`:
    also build the FHIR view FHIR-AgentBench was built on (every raw row; large from the full MIMIC-IV).
    `mimic_iv_note_dir` (or EHRBENCH_MIMIC_IV_NOTE_DIR): a MIMIC-IV-Note release, whose discharge summaries the noteqa
    suite then asks over; `notes`: synthetic or mimic_iv_note (default: mimic_iv_note with a directory).
    `questions`: how many questions per template, the kept share of empty answers, the quarantine threshold, the
    paraphrasing model (default: EHRBENCH_PARAPHRASE_MODEL, else offline phrasings). `dq`: the recipe file of the
    data-quality audit tasks (default: the suite's own). `data_dir` defaults to EHRBENCH_DATA_DIR or ./data.
    """
    with one_line_errors(BuildParameters):  # out of range: one line naming the parameter, before any stage
        parameters = BuildParameters.from_environment(
            mimic_iv_dir=mimic_iv_dir, eicu_dir=eicu_dir, strict_checksums=strict_checksums, seed=seed,
            mimic_iv_edition=mimic_iv_edition, eicu_edition=eicu_edition, current_time=current_time,
            start_year=start_year, time_span=time_span, eicu_preset=eicu_preset, ehrsql2024_dir=ehrsql2024_dir,
            mimic_iv_on_fhir=mimic_iv_on_fhir, mimic_iv_note_dir=mimic_iv_note_dir, notes=notes,
            questions=questions, dq=dq)
    recipes = load_recipes(parameters.dq.recipes)  # a broken recipe file fails the build before any stage runs
    dbt_vars = ProfileVars.for_build(parameters.seed, parameters.eicu_preset, current_time=parameters.current_time,
                                     start_year=parameters.start_year, time_span=parameters.time_span,
                                     ).with_dq(parameters.seed, recipes.extract.patients)
    layout = DataLayout(root=Path(data_dir).resolve() if data_dir else default_data_dir())
    build_id = new_build_id(layout.benchmarks)
    logs = layout.build_logs(build_id)
    created_at = datetime.now(UTC)
    stages: dict[str, StageTiming] = {}

    def announce_failed(name: str, seconds: float, exc: BaseException) -> None:
        announce(stage_line(name, seconds, f"FAILED: {type(exc).__name__}; log: {logs}"), level=logging.ERROR)

    @contextmanager
    def stage(name: str):
        """Times a stage and announces it in one line with the counts the stage reports through `done`."""
        clock, detail = StageClock(), []
        try:
            yield detail.append
        except BaseException as exc:
            announce_failed(name, clock.seconds(), exc)
            raise
        stages[name] = clock.timing()
        announce(stage_line(name, stages[name].seconds, "; ".join(detail)))

    def stage_ended(name: str, outcome: StageOutcome | BaseException, seconds: float) -> None:
        """A stage run by a worker: its line as it ends (they end in any order), its timing for the manifest."""
        if isinstance(outcome, StageNotRun):
            announce(stage_line(name, seconds, f"not run: {outcome}"), level=logging.ERROR)
            return
        if isinstance(outcome, BaseException):
            announce_failed(name, seconds, outcome)
            return
        stages[name] = outcome.timing
        announce(stage_line(name, outcome.timing.seconds, STAGE_DETAILS[name](outcome.result)))

    with build_lock(layout.build_lock, build_id), log_to_file(logs / "build.log"), subflows_without_heartbeats():
        announce(f"build {build_id}: data in {layout.root}; logs in {logs}")
        for unfinished in remove_unfinished_builds(layout.benchmarks, layout.build_lock):  # killed builds' folders
            announce(unfinished.removed_line(), level=logging.WARNING)
        build_dir = staging_dir(layout.benchmarks, build_id)
        try:
            collect_in_larger_batches()  # as the CLI does, for a run started by a deployment
            import_in_background(FLOW_IMPORTS)  # dbt's imports, while the ingest reads files
            # the workers start now and import their stages' libraries while the first stages leave a core idle
            with stage_workers(on_done=stage_ended, warm_up=WORKER_IMPORTS) as workers:
                with stage("ingest") as done:
                    releases = ingest(parameters, layout)
                    done(ingest_detail(releases))
                with stage("transform") as done:
                    dbt_runs = transform(layout, dbt_vars, logs, [release.dataset for release in releases])
                    done(dbt_detail(dbt_runs))
                absent = [f"{f.dataset}.{f.table}" for r in releases for f in r.files if f.status == "absent"]
                # in a worker, which holds Great Expectations already: this process never loads it (~130 MiB)
                validation = workers.run_now("validate", validate, layout=layout, absent_sources=absent)
                seed, notes_source = parameters.seed, parameters.notes_source
                with stage("databases") as done:  # the warehouse's last writes; every later stage only reads
                    side_run, side_inputs = build_side_stage_inputs(layout, dbt_vars, logs, notes_source)
                    workers.add("dq", build_audit_tasks, layout=layout, build_dir=build_dir, seed=seed,
                                settings=parameters.dq, warehouse=side_inputs)
                    workers.add("noteqa", build_note_questions, layout=layout, build_dir=build_dir, seed=seed,
                                settings=parameters.questions, notes_source=notes_source, warehouse=side_inputs)
                    # meds and fhir each in a fresh worker, not one holding what an earlier stage left (~200 MiB)
                    workers.add("meds", build_meds, fresh_worker=True, layout=layout, build_dir=build_dir,
                                created_at=created_at, seed=seed, warehouse=side_inputs,
                                releases={r.dataset: {"edition": r.edition, "version": r.version} for r in releases})
                    workers.start()  # they read their copy while dbt builds the profiles on this core
                    profile_run = build_profiles(layout, dbt_vars, logs, fhir_selection(parameters.mimic_iv_on_fhir),
                                                 notes_source)
                    # fhir takes the first free worker (a fresh one in its place), reading the FHIR models while the
                    # databases are exported
                    workers.add("fhir", build_fhir, fresh_worker=True, layout=layout, build_dir=build_dir,
                                profile_vars=dbt_vars, seed=seed, ehrsql2024_dir=parameters.ehrsql2024_dir,
                                mimic_iv_on_fhir=parameters.mimic_iv_on_fhir)
                    databases = export_databases(layout, build_dir, seed)
                    done(databases_detail(databases))
                # questions asks a fixed number of questions: on a small build the longest stage left, it goes ahead
                # of fhir if both wait for a worker (on a large one fhir, which grows with the data, has one by then)
                workers.add("questions", build_questions, build_dir=build_dir, profile_vars=dbt_vars, seed=seed,
                            settings=parameters.questions, data_dir=layout.root, priority=1)
                ended = workers.run()
            fhir, question_sets, audit_tasks, note_questions, meds_datasets = (
                ended[name] for name in ("fhir", "questions", "dq", "noteqa", "meds"))
            with connect(layout.warehouse, read_only=True) as con:
                row_counts = {"raw": table_row_counts(con, ("raw_",)),
                              "built": table_row_counts(con, ("staging_", *(db.schema for db in BENCHMARK_DATABASES)))}
            manifest = assemble_manifest(build_id, created_at, parameters, releases,
                                         [*dbt_runs, side_run, profile_run], validation,
                                         row_counts, stages, dbt_vars.to_dbt_vars(), databases, fhir, question_sets,
                                         audit_tasks, note_questions, meds_datasets)
            with stage("publish") as done:
                folder = publish_build(layout, manifest)
                done(folder)
        except BaseException:
            discard(layout.benchmarks, build_id)
            raise
        finally:
            layout.side_stage_inputs.unlink(missing_ok=True)  # the side stages' copy of their inputs
        announce("\n".join(summary_lines(manifest, Path(folder), logs)))
        links = {**stage_artifacts(), "questions: Data Docs": data_docs_link(layout.benchmarks, build_id)}
        markdown_artifact(key="build-summary", markdown=summary_markdown(manifest, Path(folder), links),
                          description=f"Build {build_id}: what was built and checked, and where to look next")
    return folder


STAGE_DETAILS = {"validate": validation_detail, "fhir": fhir_detail, "questions": questions_detail, "dq": dq_detail,
                 "noteqa": noteqa_detail, "meds": meds_detail}  # a stage's line after its time, from what it returned


def stage_artifacts() -> dict[str, str]:
    """Each stage's artifacts, linked into the Prefect UI (the latest version of each key)."""
    return {f"{stage}: {key}": artifact_url(key) for stage, key in STAGE_ARTIFACTS}


STAGE_ARTIFACTS = (("ingest", "ingest-summary"), ("ingest", "ingest-files"), ("transform", "transform-dbt"),
                   ("validate", "validation-summary"), ("validate", "validation-results"), ("databases", "databases"),
                   ("fhir", "fhir"), ("questions", "questions"), ("questions", "questions-validation"),
                   ("questions", "questions-data-docs"), ("dq", "dq-tasks"), ("noteqa", "noteqa"),
                   ("noteqa", "noteqa-validation"), ("meds", "meds"), ("publish", "build-published"))
