"""[6/10] questions: fresh question sets from the templates (src/ehrbench/questions/templates/), on the build's
agent-facing databases.

    generate (seeded values, gold SQL executed in DuckDB and in the exported SQLite)
      → paraphrase (an LLM when EHRBENCH_PARAPHRASE_MODEL is set, else the templates' own phrasings)
      → chatqa tasks (IncreQA instructions in lay terms, AdaptQA fallbacks) on the renamed databases
      → ground the MIMIC-IV questions in FHIR resources, read from the EHRSQL-aligned view's dbt models (the rows the
        fhir stage exports beside this stage), and check a sample of the single-patient ones both ways
      → validate with Great Expectations (expectations/questions.json): failures go to quarantine/questions.parquet,
        the build fails only when the quarantine share passes its threshold
      → write questions/questions.parquet (every question with its gold; the FHIR suite's rows with resource ids)
        and exports/ehrsql2024/ (EHRSQL-2024's data/label/answer files), exports/chatqa/ (EHR-ChatQA's task files)
      → artifact `questions`: questions per template (after quarantine).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE
from prefect.utilities.annotations import quote

from ehrbench.fhir.build_grounding import ground_on_build
from ehrbench.fhir.export import EHRSQL_ALIGNED_VIEW
from ehrbench.fhir.ground_truth import Question
from ehrbench.fhir.resource_source import WarehouseView
from ehrbench.layout import BuildLayout, DataLayout
from ehrbench.profiles import ProfileVars, schema_renames
from ehrbench.questions.chatqa import adapt_tasks, chatqa_export, incre_tasks, load_lay_terms
from ehrbench.questions.generate import GeneratedQuestion, GenerationSettings, generate_questions
from ehrbench.questions.paraphrase import ParaphraseSettings, paraphrase_questions, paraphraser_from_settings
from ehrbench.questions.suites import FHIR_DATABASE, fhir_questions, write_ehrsql2024_export, write_questions
from ehrbench.questions.templates import DATABASES, PROFILE_OF, load_templates
from ehrbench.settings import QuestionSettings
from flows.prefect_api import table_artifact
from flows.validate import validate_question_set


@flow(name="questions")
def build_questions(build_dir: Path, profile_vars: ProfileVars, seed: int, settings: QuestionSettings,
                    data_dir: Path) -> dict:
    """Returns the manifest's `questions` entry: counts, files, paraphrasing, FHIR grounding, validation."""
    logger = get_run_logger()
    templates = load_templates()
    # The databases' questions are generated side by side, and the MIMIC-IV ones grounded in FHIR while the rest goes
    # on: their queries run in DuckDB and SQLite, which release the GIL (one after the other, the stage kept one core
    # of two busy once fhir had ended). quote(): thousands of questions, which Prefect would otherwise walk looking
    # for futures (3 s of a demo build).
    generated = {database: generate.submit(build_dir, database, profile_vars, seed, settings, quote(templates))
                 for database in DATABASES}
    grounded = ground_in_fhir.submit(build_dir, quote(generated[FHIR_DATABASE].result()), profile_vars, seed,
                                     DataLayout(root=data_dir).warehouse)
    questions: list[GeneratedQuestion] = [q for database in DATABASES for q in generated[database].result()]
    paraphrasing = paraphrase(quote(questions), quote({t.id: t for t in templates}), seed, settings, data_dir)
    chatqa = chatqa_tasks(build_dir, quote(questions), quote(templates), seed, profile_vars)
    grounding = grounded.result()
    questions += fhir_questions(questions, grounding.pop("groundings")) + chatqa.pop("tasks")

    validation = validate_question_set(quote([q.to_dict() for q in questions]), list(DATABASES), build_dir,
                                       settings.max_quarantine_share)

    kept, build = [q for q in questions if q.question_id not in validation.quarantined], BuildLayout(build_dir)
    files = {"questions": write_questions(kept, build_dir), "ehrsql2024": write_ehrsql2024_export(kept, build_dir),
             "chatqa": chatqa_export([q for q in kept if q.suite == "chatqa"], build_dir),
             "quarantine": build.relative(build.question_quarantine)}
    publish_artifacts(kept)
    logger.info("questions: %d kept of %d", len(kept), len(questions))
    return {"settings": settings.model_dump(), "generated": len(questions), "kept": len(kept),
            "quarantined": validation.quarantined_count, "files": files,
            "by_suite": {f"{suite}/{db}": n for (suite, db), n in Counter((q.suite, q.db) for q in kept).items()},
            "answerable": sum(q.is_answerable for q in kept),
            "empty_by_design": sum(q.empty_by_design for q in kept),
            "templates": len({q.template_id for q in kept}), "paraphrasing": paraphrasing,
            "chatqa": chatqa, "fhir_grounding": grounding, "validation": validation.summary()}


@task(name="generate-questions", task_run_name="generate-questions/{database}", cache_policy=NONE)
def generate(build_dir: Path, database: str, profile_vars: ProfileVars, seed: int, settings: QuestionSettings,
             templates: list) -> list[GeneratedQuestion]:
    target = PROFILE_OF[database]
    duckdb_file, sqlite_file = target.benchmark.files(build_dir)
    now = datetime.strptime(profile_vars.time_shift(target.var_group).current_time, "%Y-%m-%d %H:%M:%S")
    return generate_questions(templates, database, duckdb_file, sqlite_file, now, GenerationSettings(
        per_template=settings.per_template, empty_share=settings.empty_answer_share,
        unanswerable_share=settings.unanswerable_share, seed=seed))


@task(name="paraphrase-questions", task_run_name="paraphrase-questions", cache_policy=NONE)
def paraphrase(questions: list[GeneratedQuestion], templates: dict, seed: int, settings: QuestionSettings,
               data_dir: Path) -> dict:
    paraphrasing = ParaphraseSettings.from_environment(data_dir, model=settings.paraphrase_model, seed=seed)
    report = paraphrase_questions(questions, paraphraser_from_settings(templates, paraphrasing))
    return {"model": paraphrasing.model, "embedding_model": paraphrasing.embedding_model, **report.to_dict()}


@task(name="chatqa-tasks", task_run_name="chatqa-tasks", cache_policy=NONE)
def chatqa_tasks(build_dir: Path, questions: list[GeneratedQuestion], templates: list, seed: int,
                      profile_vars: ProfileVars) -> dict:
    """EHR-ChatQA-style tasks on the renamed databases: IncreQA from the answerable questions whose items have lay
    terms, AdaptQA from the curated brand/generic, drug-class and alternative-lab tables."""
    lay_terms, renames, dropped = load_lay_terms(), schema_renames(seed), Counter()
    incre = incre_tasks(questions, templates, renames, lay_terms, seed, build_dir, dropped=dropped)
    adapt = [task for database in DATABASES
             for task in adapt_tasks(lay_terms, renames, seed, build_dir,
                                     profile_vars.time_shift(PROFILE_OF[database].var_group).current_time,
                                     databases=(database,), dropped=dropped)]
    return {"tasks": incre + adapt, "incre": len(incre), "adapt": len(adapt), "dropped": dict(dropped)}


@task(name="ground-questions-in-fhir", task_run_name="ground-questions-in-fhir/mimic_iv", cache_policy=NONE)
def ground_in_fhir(build_dir: Path, questions: list[GeneratedQuestion], profile_vars: ProfileVars, seed: int,
                   warehouse: Path) -> dict:
    """Resource ids of the MIMIC-IV questions' gold rows (ehrbench.fhir.build_grounding), and the dual check of a
    seeded sample of the single-patient ones (it reads their ids and gold SQL, which paraphrasing leaves as they
    are). The resources are read from the EHRSQL-aligned view's models in the warehouse, which the fhir stage exports
    unchanged while this stage runs."""
    target = PROFILE_OF[FHIR_DATABASE]
    asked = [Question(q.question_id, q.gold_sql_sqlite, q.patient_scoped) for q in questions
             if q.db == FHIR_DATABASE and q.is_answerable and q.gold_sql_sqlite]
    grounding = ground_on_build(asked, BuildLayout(build_dir), target.benchmark,
                                profile_vars.time_shift(target.var_group).current_time, seed,
                                resources=WarehouseView(warehouse, EHRSQL_ALIGNED_VIEW.schema))
    return {"groundings": grounding.groundings, **grounding.to_dict()}


def publish_artifacts(kept: list[GeneratedQuestion]) -> None:
    by_template = Counter((q.suite, q.db, q.category, q.template_id, q.is_answerable) for q in kept)
    table_artifact(
        key="questions", table=[{"suite": s, "db": d, "category": c, "template": t, "answerable": a, "questions": n}
                                for (s, d, c, t, a), n in sorted(by_template.items())],
        description="Generated questions per template (after quarantine)")
