"""Synthetic discharge summaries (dbt model notes__mimic_iv__discharge,
docs/benchmarks.md#synthetic-discharge-summaries) built by real dbt on the MIMIC-IV demo (the demo build's noteqa
stage): MIMIC-IV-Note's layout, labelled synthetic, every listed diagnosis checkable against the database, and
readable by the EHRNoteQA note reader (ehrbench.noteqa.records)."""

from __future__ import annotations

import re
from collections import Counter

import duckdb
import pytest

from ehrbench.noteqa.records import NoteQuestion, question_notes, read_discharge_notes

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def notes_warehouse(demo_build):
    """The demo build's warehouse as it was right after the build, whose noteqa stage built the synthetic notes (the
    models and their YAML tests: a failing one fails the build), opened read-only."""
    return demo_build["snapshot"] / "warehouse.duckdb"


def rows(warehouse, sql: str) -> list[tuple]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_one_note_per_discharged_admission_in_the_note_tables_layout(notes_warehouse):
    notes = rows(notes_warehouse, "select note_id, subject_id, hadm_id, note_type, note_seq, charttime, text "
                                  "from notes__mimic_iv.discharge")
    admissions = rows(notes_warehouse, "select subject_id, hadm_id, admittime, dischtime "
                                       "from staging_mimic_iv.stg_mimic_iv__admissions where dischtime is not null")
    assert len(notes) == len(admissions) > 200
    seen, order = Counter(), {}
    for subject, hadm, *_ in sorted(admissions, key=lambda a: (a[0], a[2], a[1])):  # per patient by admission time
        seen[subject] += 1
        order[hadm] = seen[subject]
    discharge = {hadm: dischtime for _, hadm, _, dischtime in admissions}
    for note_id, subject, hadm, note_type, seq, charttime, text in notes:
        assert note_id == f"{subject}-DS-{seq}" and note_type == "DS" and seq == order[hadm]
        assert charttime == discharge[hadm].replace(hour=0, minute=0, second=0)
        assert text.startswith("SYNTHETIC NOTE: written by ehrbench from structured MIMIC-IV rows")
        for section in ("Chief Complaint:", "Pertinent Results:", "Brief Hospital Course:", "Discharge Diagnosis:"):
            assert f"\n{section}\n" in text


def test_every_diagnosis_of_the_admission_is_listed_in_order(notes_warehouse):
    titles = {}
    for hadm, seq, title in rows(notes_warehouse, """
            select d.hadm_id, d.seq_num, t.long_title
            from staging_mimic_iv.stg_mimic_iv__diagnoses_icd as d
            join staging_mimic_iv.stg_mimic_iv__d_icd_diagnoses as t using (icd_code, icd_version)
            order by d.hadm_id, d.seq_num"""):
        titles.setdefault(hadm, []).append(f"{seq}. {title}")
    texts = dict(rows(notes_warehouse, "select hadm_id, text from notes__mimic_iv.discharge"))
    checked = 0
    for hadm, listed in titles.items():
        diagnosis = texts[hadm].split("\nDischarge Diagnosis:\n", 1)[1].split("\n \n", 1)[0]
        assert diagnosis.split("\n") == listed
        assert texts[hadm].split("\nChief Complaint:\n", 1)[1].startswith(listed[0].split(". ", 1)[1])
        checked += 1
    assert checked > 200


def test_the_notes_read_as_mimic_iv_note_files(notes_warehouse, tmp_path):
    """Written as MIMIC-IV-Note's discharge.csv.gz, the notes come back through the EHRNoteQA reader: charttime
    order, the published header and cleaning."""
    path = tmp_path / "discharge.csv.gz"
    con = duckdb.connect(str(notes_warehouse), read_only=True)
    try:
        con.execute(f"copy (select * from notes__mimic_iv.discharge order by note_id) to '{path}' (header, "
                    f"compression gzip)")
        subject, hadms = con.execute(
            "select subject_id, list(hadm_id order by note_seq) from notes__mimic_iv.discharge "
            "group by subject_id having count(*) >= 2 order by subject_id limit 1").fetchone()
    finally:
        con.close()
    question = NoteQuestion(patient_id=subject, category="Level1", num_notes=2, question="q", choice_A="a",
                            choice_B="b", choice_C="c", choice_D="d", choice_E="e", answer="A")
    notes = question_notes(question, read_discharge_notes(path, {subject}), source=path)
    assert [re.search(r"Admission ID : (\d+)", note).group(1) for note in notes] == [str(h) for h in hadms[:2]]
    assert all(note.startswith(f"Patient ID : {subject}\n") for note in notes)
    assert all("\n \n" not in note and "  " not in note for note in notes)  # cleaned


def test_template_questions_ask_what_the_admissions_notes_state(notes_warehouse):
    """One question per patient over their first three notes; the correct option is read back from the admission's
    own note section, independently of the facts table the generator used."""
    from ehrbench.noteqa.generation import AdmissionFacts, generate_questions

    facts = [AdmissionFacts(*row) for row in rows(notes_warehouse, """
        select subject_id, hadm_id, note_seq, dischtime, length_of_stay_days, principal_diagnosis, first_abnormal_lab,
               discharge_location
        from int_notes__mimic_iv.int_notes__mimic_iv__admission_facts""")]
    texts = {hadm: text for hadm, text in rows(notes_warehouse, "select hadm_id, text from notes__mimic_iv.discharge")}
    notes: dict[int, list[tuple[str, str]]] = {}
    for note_id, subject, _hadm, text in rows(notes_warehouse, "select note_id, subject_id, hadm_id, text "
                                                               "from notes__mimic_iv.discharge order by note_seq"):
        notes.setdefault(subject, []).append((note_id, text))
    questions = generate_questions(facts, notes, seed=0)
    assert len(questions) >= 0.9 * len(notes)
    assert {q["template"] for q in questions} == {"principal_diagnosis", "length_of_stay", "first_abnormal_lab",
                                                  "discharge_location"}

    def section(text: str, title: str) -> str:
        return text.split(f"\n{title}\n", 1)[1].split("\n", 1)[0]

    for item in questions:
        text, correct = texts[item["hadm_id"]], item[f"choice_{item['answer']}"]
        stated = {"principal_diagnosis": section(text, "Chief Complaint:"),
                  "discharge_location": section(text, "Discharge Disposition:"),
                  "length_of_stay": re.search(r"Hospitalized for (\d+) days", text).group(1),
                  "first_abnormal_lab": section(text, "Pertinent Results:")}[item["template"]]
        if item["template"] == "first_abnormal_lab":
            assert f" {correct} " in stated
        else:
            assert correct == stated
        assert item["num_notes"] == min(3, len(notes[item["patient_id"]]))
