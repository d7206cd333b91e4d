"""build-benchmark: the whole pipeline, one subflow per stage.

    ingest → transform (dbt staging) → validate (GX) → databases (dbt profiles, export)
        → fhir (dbt FHIR resources, export, fhir.resources validation, resource-id ground truth)
        → questions (templates → gold SQL executed → paraphrases → FHIR ids → GX, quarantine)
        → dq (audit extract → seeded errors with hidden cluster gold → verified task folders, calibration) → publish

Nothing is published unless every stage succeeds; a failed build leaves `latest` as it was.
Only one build runs at a time (the DuckDB warehouse has a single writer).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger

from ehrbench.dq.recipes import load_recipes
from ehrbench.manifest import StageTiming, assemble_manifest
from ehrbench.profiles import BENCHMARK_DATABASES, profile_vars
from ehrbench.publish import discard, new_build_id, staging_dir
from ehrbench.settings import BuildParameters, DataLayout, DqSettings, Edition, QuestionSettings, default_data_dir
from ehrbench.warehouse import build_lock, connect, table_row_counts
from flows.databases import build_databases
from flows.fhir_view import build_fhir
from flows.ingest import ingest
from flows.inject_errors import inject_errors
from flows.publish import publish_build
from flows.questions import build_questions
from flows.transform import transform
from flows.validate import validate


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
    questions: QuestionSettings | None = None,
    dq: DqSettings | None = None,
    data_dir: str | None = None,
) -> str:
    """Build a benchmark from raw MIMIC-IV and eICU files; returns the published build folder.

    Source directories default to EHRBENCH_MIMIC_IV_DIR / EHRBENCH_EICU_DIR, else the release is
    downloaded from PhysioNet into data/raw/. `ehrsql2024_dir` (or EHRBENCH_EHRSQL2024_DIR): the published
    EHRSQL-2024 mimic_iv/ folder, whose valid questions then get FHIR resource-id ground truth. `questions`: how
    many questions per template, the kept share of empty answers, the quarantine threshold, the paraphrasing
    model (default: EHRBENCH_PARAPHRASE_MODEL, else offline phrasings). `dq`: the recipe file of the data-quality
    audit tasks (default: the suite's own). `data_dir`
    defaults to EHRBENCH_DATA_DIR or ./data.
    """
    logger = get_run_logger()
    parameters = BuildParameters.from_environment(
        mimic_iv_dir=mimic_iv_dir, eicu_dir=eicu_dir, strict_checksums=strict_checksums, seed=seed,
        mimic_iv_edition=mimic_iv_edition, eicu_edition=eicu_edition, current_time=current_time,
        start_year=start_year, time_span=time_span, eicu_preset=eicu_preset, ehrsql2024_dir=ehrsql2024_dir,
        questions=questions, dq=dq)
    load_recipes(parameters.dq.recipes)  # a broken recipe file fails the build before any stage runs
    dbt_vars = profile_vars(parameters.seed, parameters.eicu_preset, current_time=parameters.current_time,
                            start_year=parameters.start_year, time_span=parameters.time_span)
    layout = DataLayout(root=Path(data_dir).resolve() if data_dir else default_data_dir())
    build_id = new_build_id(layout.benchmarks)
    created_at = datetime.now(UTC)
    stages: dict[str, StageTiming] = {}

    @contextmanager
    def stage(name: str):
        started, clock = datetime.now(UTC), time.perf_counter()
        yield
        stages[name] = StageTiming(started_at=started, seconds=round(time.perf_counter() - clock, 3))
        logger.info("stage %s took %.1f s", name, stages[name].seconds)

    with build_lock(layout.build_lock, build_id):
        logger.info("Build %s: data in %s", build_id, layout.root)
        build_dir = staging_dir(layout.benchmarks, build_id)
        try:
            with stage("ingest"):
                releases = ingest(parameters, layout)
            with stage("transform"):
                dbt_runs = transform(layout)
            absent = [f"{f.dataset}.{f.table}" for r in releases for f in r.files if f.status == "absent"]
            with stage("validate"):
                validation = validate(layout, absent)
            with stage("databases"):
                profile_run, databases = build_databases(layout, build_dir, dbt_vars, parameters.seed)
            with stage("fhir"):
                fhir_run, fhir = build_fhir(layout, build_dir, dbt_vars, parameters.seed, parameters.ehrsql2024_dir)
            with stage("questions"):
                question_sets = build_questions(build_dir, dbt_vars, parameters.seed, parameters.questions,
                                                layout.root)
            with stage("dq"):
                dq_run, audit_tasks = inject_errors(layout, build_dir, dbt_vars, parameters.seed, parameters.dq)
            with connect(layout.warehouse, read_only=True) as con:
                row_counts = {"raw": table_row_counts(con, ("raw_",)),
                              "built": table_row_counts(con, ("staging_", *(db.schema for db in BENCHMARK_DATABASES)))}
            manifest = assemble_manifest(build_id, created_at, parameters, releases,
                                         [*dbt_runs, profile_run, fhir_run, dq_run], validation, row_counts,
                                         stages, dbt_vars, databases, fhir, question_sets, audit_tasks)
            with stage("publish"):
                folder = publish_build(layout, manifest)
        except BaseException:
            discard(layout.benchmarks, build_id)
            raise
    return folder
