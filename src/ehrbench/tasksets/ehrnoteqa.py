"""Format `ehrnoteqa`: EHRNoteQA's question file (PhysioNet `ehr-notes-qa-llms` 1.0.1 `EHRNoteQA.jsonl`, one question
per patient; ehrbench.noteqa.records) over the patients' discharge summaries of MIMIC-IV-Note 2.2
(`note/discharge.csv.gz`, given with `--notes`: the release folder or the folder holding the file).

Each question is linked to its notes as EHRNoteQA's preprocessing links them (ji-youn-kim/EHRNoteQA
`src/preprocessing/preprocess.py`): by `patient_id` (MIMIC-IV `subject_id`, the only link the file carries), the
patient's discharge summaries in charttime order, the first `num_notes` of them, each cleaned and headed the same way
(ehrbench.noteqa.published). A patient with fewer notes than the question asks over is refused, naming the question
and the notes found. The notes go into the task set (`notes.parquet`), so the evaluation needs no credentialed file.

The tasks run in the `noteqa` agent suite and are scored by protocol `ehrnoteqa`; the gold is the published answer
letter and its option's text (no SQL, no database of the build). Level (`category`) and note count are kept for the
breakdowns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ehrbench.errors import ConfigError
from ehrbench.noteqa.records import DischargeNote, NoteQuestion, read_discharge_notes, read_questions
from ehrbench.tasksets.formats import TaskFormat
from ehrbench.tasksets.model import ImportedTask, Target

NOTES = Target("notes", "mimic_iv_note")  # no database: the task set's own notes file
DISCHARGE = Path("note") / "discharge.csv.gz"


class EhrNoteQaFormat(TaskFormat):
    name = "ehrnoteqa"
    protocol = "ehrnoteqa"
    suite = "noteqa"
    profile = NOTES.profile
    summary = "EHRNoteQA.jsonl (one question per patient) over MIMIC-IV-Note's discharge summaries (--notes DIR)"
    needs_notes = True

    def read(self, paths: Sequence[Path]) -> list[ImportedTask]:
        if len(paths) != 1:
            raise ConfigError(f"{', '.join(map(str, paths))}: expected one file, EHRNoteQA.jsonl")
        path = Path(paths[0])
        return [_task(question, path) for question in read_questions(path)]

    def default_name(self, paths: Sequence[Path]) -> str:
        return "ehrnoteqa"

    def target(self, task: ImportedTask) -> Target:
        return NOTES

    def not_compared(self, build) -> str | None:
        return "the published answer letters are the gold: EHRNoteQA has no SQL"

    def current_time(self, build, target: Target) -> str | None:
        return None

    def read_notes(self, tasks: Sequence[ImportedTask], notes: Path
                   ) -> tuple[Path, list[ImportedTask], list[DischargeNote]]:
        """The discharge file under `notes`, the tasks with the ids of the notes each asks over (`extra.note_ids`),
        and those notes. A patient with fewer notes than asked: a ConfigError naming the question and the notes."""
        path = discharge_file(notes)
        found = read_discharge_notes(path, {int(task.source_id) for task in tasks})
        linked, asked = [], []
        for task in tasks:
            have, wanted = found.get(int(task.source_id), []), task.extra["num_notes"]
            if len(have) < wanted:
                listed = ", ".join(note.note_id for note in have) or "none"
                raise ConfigError(f"{path}: question of patient {task.source_id} ({task.source_file}) asks over "
                                  f"{wanted} discharge summaries; the file has {len(have)} ({listed})")
            linked.append(replace(task, extra={**task.extra, "note_ids": [n.note_id for n in have[:wanted]]}))
            asked += have[:wanted]
        return path, linked, asked


def discharge_file(notes: Path) -> Path:
    """`discharge.csv.gz` in a MIMIC-IV-Note release folder (`note/`) or the folder holding it."""
    for candidate in (notes / DISCHARGE, notes / DISCHARGE.name):
        if candidate.is_file():
            return candidate
    raise ConfigError(f"--notes: no {DISCHARGE} or {DISCHARGE.name} under {notes}; expected MIMIC-IV-Note 2.2's "
                      f"release folder (PhysioNet mimic-iv-note) or the folder holding its discharge.csv.gz")


def _task(question: NoteQuestion, path: Path) -> ImportedTask:
    choices = question.choices
    return ImportedTask(
        source_id=str(question.patient_id), source_file=path.name, question=question.question, db="mimic_iv",
        published_answer=question.answer, answer_rows=((choices["ABCDE".index(question.answer)],),),
        extra={"choices": list(choices), "category": question.category, "num_notes": question.num_notes,
               "clinician": question.clinician})
