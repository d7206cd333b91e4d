"""[8/10] noteqa: questions over a patient's discharge summaries, EHRNoteQA-style
(docs/benchmarks.md#ehrnoteqa-accuracy).

    the notes models (built by dbt in the databases stage; models/notes/mimic_iv/: SYNTHETIC discharge summaries in
      MIMIC-IV-Note's layout, written from each admission's structured rows, and the facts they state; or, when the
      build asks over real notes, models/notes/mimic_iv_note/: MIMIC-IV-Note's of the build's patients, times
      shifted like the databases')
      → at most `note_patients` patients (a seeded sample beyond)
      → one question per patient over their first three notes: written by an LLM when a note-question model is set
        (ehrbench.noteqa.llm_generation: cached, filtered — evidence in the notes, distinct options, not guessable
        without the notes, no near-duplicates), else from a template about the notes' known facts
        (ehrbench.noteqa.generation; synthetic notes only); its checks computed from the notes
        (ehrbench.noteqa.suite.checked)
      → validate with Great Expectations (expectations/noteqa.json): failures go to quarantine/noteqa.parquet, the
        build fails only when the quarantined share passes the questions' threshold
      → write noteqa/ (questions with hidden gold, the notes asked over) and exports/ehrnoteqa/ (EHRNoteQA's files)
      → artifact `noteqa`: questions per level, note count and template.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ehrbench.environment import environment
from ehrbench.errors import ConfigError
from ehrbench.layout import BuildLayout, DataLayout
from ehrbench.llm.cache import CachedChat, ResponseCache
from ehrbench.llm.chat import chat_model
from ehrbench.noteqa.llm_generation import llm_questions
from ehrbench.noteqa.suite import (
    NOTE_QUESTION_SCHEMA,
    NOTES_DATABASE,
    asked_notes,
    checked,
    patients_asked,
    read_notes,
    read_synthetic_notes,
    template_questions,
    write_note_questions,
)
from ehrbench.settings import NotesSource, QuestionSettings
from ehrbench.validation.questions import QuestionValidation, validate_questions, write_quarantine
from flows.prefect_api import markdown_artifact, table_artifact
from flows.validate import EXPECTATIONS_DIR

NOTE_QUESTION_SUITE = EXPECTATIONS_DIR / "noteqa.json"


@flow(name="noteqa")
def build_note_questions(layout: DataLayout, build_dir: Path, seed: int, settings: QuestionSettings,
                         notes_source: NotesSource = "synthetic", warehouse: Path | None = None) -> dict:
    """Returns the manifest's `noteqa` entry: notes source, generator, counts, files, validation. The warehouse
    (default `layout.warehouse`; a build passes its copy of the side stages' inputs) holds the models of
    `NOTES_MODELS[notes_source]`."""
    logger = get_run_logger()
    warehouse = warehouse or layout.warehouse
    if notes_source == "synthetic":
        facts, every_note = read_synthetic_notes(warehouse)
    else:
        facts, every_note = [], read_notes(warehouse, notes_source)
    notes = patients_asked(every_note, settings.note_patients, seed)
    model = settings.note_question_model or environment().note_question_model
    if model:
        questions, generation = write_with_llm(notes, model, seed, layout.root, notes_source)
    elif notes_source == "synthetic":
        questions, generation = template_questions(facts, notes, seed=seed, notes_source=notes_source), {}
    else:  # BuildParameters refuses this before any stage runs; a direct call of the flow gets the same words
        raise ConfigError("noteqa over MIMIC-IV-Note needs a note-question model: template questions exist only for "
                          "synthetic notes")
    validation = validate_note_questions(questions, build_dir, settings.max_quarantine_share)
    kept = [q for q in questions if q["question_id"] not in validation.quarantined]
    synthetic = notes_source == "synthetic"
    files = write_note_questions(kept, asked_notes(kept, notes), build_dir, synthetic=synthetic)
    publish_artifacts(kept, notes_source)
    logger.info("noteqa: %d questions kept of %d, over %d %s notes of %d patients", len(kept), len(questions),
                sum(len(found) for found in notes.values()), "SYNTHETIC" if synthetic else "MIMIC-IV-Note",
                len(notes))
    return {"notes_source": notes_source,
                 "notes_times": "as written from the raw rows" if synthetic else "shifted: ehrsql2024 offsets",
                 "notes": sum(len(found) for found in every_note.values()),
                 "patients_with_notes": len(every_note), "patients_asked": len(notes),
                 "generated": len(questions), "kept": len(kept),
                 "quarantined": validation.quarantined_count, "files": files,
                 "by_level": dict(Counter(q["category"] for q in kept)),
                 "by_num_notes": {str(n): c for n, c in sorted(Counter(q["num_notes"] for q in kept).items())},
                 "by_template": dict(Counter(q["template"] for q in kept)), "seed": seed,
                 "generator": f"llm:{model}" if model else "template", "llm_generation": generation,
                 "validation": validation.summary()}


@task(name="write-note-questions", task_run_name="write-note-questions/llm", cache_policy=NO_CACHE)
def write_with_llm(notes: dict, model: str, seed: int, data_dir: Path,
                   notes_source: NotesSource) -> tuple[list[dict], dict]:
    """LLM-written questions (responses cached in the paraphrases' cache), with the filters' counts."""
    cache = ResponseCache(environment().paraphrase_cache or data_dir / "cache" / "llm.sqlite")
    chat = CachedChat(chat_model(model), cache)
    written, report = llm_questions(notes, chat, seed=seed, blind=chat)
    records = [{"question_id": str(q["patient_id"]), "db": NOTES_DATABASE, **q, "notes_source": notes_source}
               for q in written]
    get_run_logger().info("noteqa: %s wrote %d questions for %d patients; rejected %s", model, report.kept,
                          report.asked, dict(report.rejected))
    return checked(records, notes), report.to_dict()


@task(name="validate-note-questions", task_run_name="validate-note-questions", cache_policy=NO_CACHE)
def validate_note_questions(records: list[dict], build_dir: Path, max_quarantine_share: float) -> QuestionValidation:
    """Great Expectations on the note questions; writes the quarantine into the build."""
    validation = validate_questions(records, NOTE_QUESTION_SUITE, databases=[NOTES_DATABASE])
    write_quarantine(records, validation, BuildLayout(build_dir).noteqa_quarantine, NOTE_QUESTION_SCHEMA)
    for shortfall in validation.coverage_shortfalls():
        get_run_logger().warning("note question coverage not met: %s", shortfall)
    markdown_artifact(key="noteqa-validation", markdown=validation.markdown(),
                      description="Great Expectations on the note questions")
    validation.check(max_quarantine_share)
    return validation


def publish_artifacts(kept: list[dict], notes_source: NotesSource) -> None:
    counts = Counter((q["category"], q["num_notes"], q["template"]) for q in kept)
    source = "SYNTHETIC" if notes_source == "synthetic" else "MIMIC-IV-Note"
    table_artifact(key="noteqa", table=[{"level": level, "notes": n, "template": template, "questions": count}
                                        for (level, n, template), count in sorted(counts.items())],
                   description=f"Note questions per level, note count and template (notes: {source})")
