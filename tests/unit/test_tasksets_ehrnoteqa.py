"""Format `ehrnoteqa`: EHRNoteQA.jsonl imported over notes in MIMIC-IV-Note's discharge.csv.gz (both written here),
each question linked to its patient's first `num_notes` discharge summaries in charttime order as EHRNoteQA's
preprocessing links them, the notes copied into the task set, and loaded as two noteqa tasks per question whose
prompt shows the notes as the published prompt does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ehrbench.agents.baselines import OracleAgent
from ehrbench.errors import ConfigError
from ehrbench.evaluation.tasks import taskset_tasks
from ehrbench.layout import DataLayout
from ehrbench.noteqa.published import answer_prompt
from ehrbench.noteqa.records import DischargeNote
from ehrbench.noteqa.suite import discharge_csv
from ehrbench.scoring import score_trial
from ehrbench.tasksets.importer import plan_import, run_import

# patient 1: three notes, written out of charttime order; patient 2: one note; patient 3 (no question): one note
NOTES = [
    DischargeNote("1-DS-3", 1, 13, 3, "2180-03-01 10:00:00", "third  visit\n\n   Plan: rest"),
    DischargeNote("1-DS-1", 1, 11, 1, "2180-01-01 09:00:00", "first visit"),
    DischargeNote("1-DS-2", 1, 12, 2, "2180-02-01 09:00:00", "second visit"),
    DischargeNote("2-DS-1", 2, 21, 1, "2170-05-05 00:00:00", "only visit"),
    DischargeNote("3-DS-1", 3, 31, 1, "2170-05-05 00:00:00", "another patient"),
]


def question(patient: int, num_notes: int, answer: str = "B", **extra) -> dict:
    return {"patient_id": patient, "category": "Level1" if num_notes == 1 else "Level2", "num_notes": num_notes,
            "clinician": "a", "question": f"What happened to patient {patient}?",
            **{f"choice_{letter}": f"option {letter} of {patient}" for letter in "ABCDE"}, "answer": answer, **extra}


@pytest.fixture
def data(tmp_path) -> DataLayout:
    folder = tmp_path / "data" / "benchmarks" / "B1"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"build_id": "B1", "parameters": {}}))
    (tmp_path / "data" / "benchmarks" / "latest").symlink_to("B1")
    return DataLayout(root=tmp_path / "data")


@pytest.fixture
def files(tmp_path) -> tuple[Path, Path]:
    qa = tmp_path / "EHRNoteQA.jsonl"
    qa.write_text("\n".join(json.dumps(q) for q in (question(1, 2), question(2, 1, "E"))) + "\n")
    release = tmp_path / "mimic-iv-note"
    (release / "note").mkdir(parents=True)
    (release / "note" / "discharge.csv.gz").write_bytes(discharge_csv(NOTES))
    return qa, release


def test_questions_are_linked_to_their_patients_first_notes_in_charttime_order(data, files):
    qa, release = files
    plan = plan_import(data, "ehrnoteqa", [qa], notes=release)
    assert [note.note_id for note in plan.notes] == ["1-DS-1", "1-DS-2", "2-DS-1"]  # not file order, not note 3
    manifest = run_import(plan)
    assert (manifest.name, manifest.suite, manifest.protocol, manifest.tasks) == ("ehrnoteqa", "noteqa", "ehrnoteqa", 2)
    assert [source.path for source in manifest.sources] == [str(qa.resolve()),
                                                           str((release / "note" / "discharge.csv.gz").resolve())]

    tasks = taskset_tasks(data.taskset("ehrnoteqa"), data.build_folder("latest"))
    assert [task.view.task_id for task in tasks] == ["ehrnoteqa/1-multichoice", "ehrnoteqa/1-openended",
                                                    "ehrnoteqa/2-multichoice", "ehrnoteqa/2-openended"]
    first = tasks[0]
    # the published preprocessing's header and cleaning, the published prompt's note blocks
    assert first.view.notes == ("[note 1 start]\nPatient ID : 1\nAdmission ID : 11\nChartdate : 2180-01-01\nfirst visit"
                                "\n[note 1 end]\n\n[note 2 start]\nPatient ID : 1\nAdmission ID : 12\n"
                                "Chartdate : 2180-02-01\nsecond visit\n[note 2 end]")
    assert answer_prompt("multichoice", first.view.notes, first.view.instruction, first.view.choices).endswith(
        "Question : What happened to patient 1?\nChoices :\nA. option A of 1\nB. option B of 1\nC. option C of 1\n"
        "D. option D of 1\nE. option E of 1\n\nAnswer :")
    assert (first.gold.published_answer, first.gold.answer_text) == ("B", "option B of 1")
    assert (tasks[2].gold.published_answer, tasks[2].gold.answer_text) == ("E", "option E of 2")
    oracle = OracleAgent({task.key: task.gold for task in tasks})
    assert all(score_trial(task, oracle.run(task.view))["correct"] for task in tasks)


def test_a_patient_with_fewer_notes_than_asked_is_refused_naming_question_and_notes(data, files, tmp_path):
    qa, release = files
    qa.write_text(json.dumps(question(2, 3)) + "\n")
    with pytest.raises(ConfigError, match=r"patient 2 \(EHRNoteQA.jsonl\) asks over 3 discharge summaries; the "
                                          r"file has 1 \(2-DS-1\)"):
        plan_import(data, "ehrnoteqa", [qa], notes=release)
    qa.write_text(json.dumps(question(9, 1)) + "\n")
    with pytest.raises(ConfigError, match=r"patient 9 .* has 0 \(none\)"):
        plan_import(data, "ehrnoteqa", [qa], notes=release)
    assert not data.taskset("ehrnoteqa").root.exists()


def test_the_notes_folder_is_required_and_checked(data, files, tmp_path):
    qa, release = files
    with pytest.raises(ConfigError, match="--notes: format ehrnoteqa asks its questions over notes"):
        plan_import(data, "ehrnoteqa", [qa])
    with pytest.raises(ConfigError, match="--notes: no note/discharge.csv.gz or discharge.csv.gz under"):
        plan_import(data, "ehrnoteqa", [qa], notes=tmp_path / "empty")
    # the folder holding discharge.csv.gz itself, as EHRNoteQA's preprocess.py takes it
    assert len(plan_import(data, "ehrnoteqa", [qa], notes=release / "note").notes) == 3


@pytest.mark.parametrize(("line", "message"), [
    ('{"patient_id": 1, "category": "Level1", "num_notes": 4}', r"line 1 \(patient 1\): field num_notes"),
    (json.dumps(question(1, 1, "F")), r"line 1 \(patient 1\): field answer"),
    ("not json", "line 1: not valid JSON"),
])
def test_a_malformed_question_is_refused_naming_the_line_and_field(data, files, line, message):
    qa, release = files
    qa.write_text(line + "\n")
    with pytest.raises(ConfigError, match=message):
        plan_import(data, "ehrnoteqa", [qa], notes=release)
