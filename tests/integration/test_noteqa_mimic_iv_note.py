"""The noteqa stage over MIMIC-IV-Note (a release the tests write in its PhysioNet layout, since the real one is
credentialed): ingested and verified, staged and joined to the build's patients and admissions by dbt, note times
moved by the same per-patient offsets as the shifted databases, and questions written by an LLM (the real openai SDK
against a scripted OpenAI-compatible server) under a real Prefect server, for a seeded sample of the patients.

Runs on a copy of the FHIR view's warehouse (MIMIC-IV demo staged, ehrsql2024 profile built): no build of its own."""

from __future__ import annotations

import gzip
import json
import shutil
from hashlib import sha256

import duckdb
import pyarrow.parquet as pq
import pytest

from ehrbench.layout import BuildLayout, DataLayout
from ehrbench.noteqa.suite import NOTES_MODELS, patients_asked, read_notes
from ehrbench.profiles import profile_vars
from ehrbench.settings import QuestionSettings
from ehrbench.sources.ingest import ingest_release
from ehrbench.transform import run_dbt, staging_selection
from ehrbench.warehouse import connect
from tests.llm_servers import OpenAIServer, Reply
from tests.mimic_iv_note_release import NOTE_RELEASE, discharge_text, write_note_release

pytestmark = pytest.mark.integration

PLACES = ("Home", "Home With Service", "Extended Care", "Skilled Nursing Facility", "Hospice", "Rehab")
FOREIGN_SUBJECT, UNKNOWN_HADM = 19_999_999, 29_999_999  # a patient and an admission the demo does not have
ASKED = 12


def _release_rows(con) -> dict[str, list[dict]]:
    """A discharge summary per demo admission with a discharge time (its disposition chosen by position), one of a
    patient the demo lacks and one of an admission it lacks; radiology reports with and without an admission."""
    admissions = con.execute("""select subject_id, hadm_id, dischtime from raw_mimic_iv.admissions
                                where dischtime is not null order by subject_id, admittime""").fetchall()
    discharge, seq = [], {}
    for i, (subject, hadm, dischtime) in enumerate(admissions):
        seq[subject] = seq.get(subject, 0) + 1
        discharge.append({"note_id": f"{subject}-DS-{seq[subject]}", "subject_id": subject, "hadm_id": hadm,
                          "note_type": "DS", "note_seq": seq[subject], "charttime": f"{dischtime:%Y-%m-%d} 00:00:00",
                          "storetime": f"{dischtime:%Y-%m-%d %H:%M:%S}",
                          "text": discharge_text(PLACES[i % len(PLACES)], f"complaint {i}, severe")})
    first = admissions[0]
    discharge += [
        {"note_id": f"{FOREIGN_SUBJECT}-DS-1", "subject_id": FOREIGN_SUBJECT, "hadm_id": UNKNOWN_HADM,
         "note_type": "DS", "note_seq": 1, "charttime": "2150-01-01 00:00:00", "text": discharge_text("Home", "x")},
        {"note_id": f"{first[0]}-DS-99", "subject_id": first[0], "hadm_id": UNKNOWN_HADM + 1, "note_type": "DS",
         "note_seq": 99, "charttime": "2150-01-01 00:00:00", "text": discharge_text("Home", "y")}]
    radiology = [
        {"note_id": f"{first[0]}-RR-1", "subject_id": first[0], "hadm_id": None, "note_type": "RR", "note_seq": 1,
         "charttime": "2180-01-01 10:00:00", "text": "CHEST (PA AND LAT)\nIMPRESSION: No acute process."},
        {"note_id": f"{first[0]}-RR-2", "subject_id": first[0], "hadm_id": first[1], "note_type": "AR",
         "note_seq": 2, "charttime": "2180-01-02 10:00:00", "text": "ADDENDUM: none."},
        {"note_id": f"{FOREIGN_SUBJECT}-RR-1", "subject_id": FOREIGN_SUBJECT, "hadm_id": None, "note_type": "RR",
         "note_seq": 1, "charttime": "2150-01-01 10:00:00", "text": "IMPRESSION: normal."}]
    detail = [{"note_id": note["note_id"], "subject_id": note["subject_id"], "field_name": "exam_name",
               "field_value": "CHEST (PA AND LAT)", "field_ordinal": 1} for note in radiology]
    return {"discharge": discharge, "radiology": radiology, "radiology_detail": detail,
            "discharge_detail": [{"note_id": discharge[0]["note_id"], "subject_id": discharge[0]["subject_id"],
                                  "field_name": "author", "field_value": "___", "field_ordinal": 1}]}


def _writer(request) -> Reply:
    """The question writer quotes the first note's discharge disposition (correct option at C); the blind model
    always answers A, so no question is guessable."""
    content = request.body["messages"][-1]["content"]
    if request.body["messages"][0]["role"] != "system":
        return Reply(text="A")
    patient = int(content.split("Patient ID : ", 1)[1].split("\n", 1)[0])
    place = content.split("Discharge Disposition:\n", 1)[1].split("\n", 1)[0]
    others = [p for p in PLACES if p != place][:4]
    return Reply(text=json.dumps({
        "question": f"Where did patient {sha256(str(patient).encode()).hexdigest()[:12]} go after discharge?",
        "choices": dict(zip("ABCDE", [others[0], others[1], place, others[2], others[3]], strict=True)),
        "answer": "C", "evidence": f"Discharge Disposition:\n{place}", "open_answer": place}))


@pytest.fixture(scope="module")
def note_build(fhir_warehouse, prefect_api_url, tmp_path_factory) -> dict:
    from flows.noteqa import build_note_questions

    layout = DataLayout(root=tmp_path_factory.mktemp("note-data"))
    shutil.copy(fhir_warehouse, layout.warehouse)
    shutil.copytree(fhir_warehouse.parent / "dbt", layout.dbt_work)  # dbt's parse, reused
    with connect(layout.warehouse) as con:
        rows = _release_rows(con)
        release = write_note_release(layout.raw / NOTE_RELEASE.slug, rows)
        files = ingest_release(con, NOTE_RELEASE, release, origin="local", strict_checksums=True)
    staging = run_dbt(["build", "--select", *staging_selection(["mimic_iv_note"])], warehouse=layout.warehouse,
                      work_dir=layout.dbt_work, vars=profile_vars(0))
    # a build's databases stage builds the notes models with the profiles; the noteqa stage then only reads them
    run = run_dbt(["build", "--select", NOTES_MODELS["mimic_iv_note"]], warehouse=layout.warehouse,
                  work_dir=layout.dbt_work, vars=profile_vars(0))
    build_dir = layout.benchmarks / "notes-build"
    with OpenAIServer() as server:
        server.respond(_writer)
        settings = QuestionSettings(note_question_model=f"openai:scripted@{server.base_url}", note_patients=ASKED)
        entry = build_note_questions(layout, build_dir, 0, settings, "mimic_iv_note")
        requests = len(server.requests)
    return {"layout": layout, "rows": rows, "ingested": files, "staging": staging, "run": run, "entry": entry,
            "build": BuildLayout(build_dir), "requests": requests}


def test_the_release_is_verified_and_staged_with_its_tests(note_build):
    assert {f.table: (f.status, f.rows) for f in note_build["ingested"]} == {
        name: ("verified", len(rows)) for name, rows in note_build["rows"].items()}
    assert note_build["staging"].count("error") == 0 and note_build["staging"].count("fail") == 0
    # 4 views; 4 tests (a model's tests are one node)
    assert note_build["staging"].count("success") == 4 and note_build["staging"].count("pass") == 4
    assert note_build["run"].count("error") == 0 and note_build["run"].count("fail") == 0


def test_notes_are_the_builds_patients_and_admissions_in_the_databases_shifted_times(note_build):
    con = duckdb.connect(str(note_build["layout"].warehouse), read_only=True)
    try:
        kept = {row[0] for row in con.execute("select note_id from notes__mimic_iv_note.discharge").fetchall()}
        demo = [n["note_id"] for n in note_build["rows"]["discharge"][:-2]]
        assert kept == set(demo)  # not the foreign patient's, not the unknown admission's
        # every time moved by its patient's offset, the one the ehrsql2024 and renamed databases use
        moved = con.execute("""
            select count(*), count(distinct o.offset_days),
                   count(*) filter (where n.charttime <> r.charttime + to_days(cast(o.offset_days as integer))
                                       or n.storetime <> r.storetime + to_days(cast(o.offset_days as integer))
                                       or n.text <> r.text)
            from notes__mimic_iv_note.discharge n
            join raw_mimic_iv_note.discharge r using (note_id)
            join int_ehrsql2024__mimic_iv.int_ehrsql2024__mimic_iv__subject_offsets o on o.subject_id = n.subject_id
        """).fetchone()
        assert moved[0] == len(demo) and moved[1] > 1 and moved[2] == 0
        # ...so a note's admission in the ehrsql2024 database is discharged on the note's (shifted) chart date
        lined_up = con.execute("""
            select count(*), count(*) filter (where cast(n.charttime as date) = cast(a.dischtime as date))
            from notes__mimic_iv_note.discharge n join ehrsql2024__mimic_iv.admissions a using (hadm_id)
            where a.dischtime is not null""").fetchone()
        assert lined_up[0] > 0 and lined_up[0] == lined_up[1]
        radiology = dict(con.execute("select note_id, hadm_id from notes__mimic_iv_note.radiology").fetchall())
        first = note_build["rows"]["radiology"][0]["subject_id"]
        assert radiology == {f"{first}-RR-1": None, f"{first}-RR-2": note_build["rows"]["radiology"][1]["hadm_id"]}
        details = {r[0] for r in con.execute("select note_id from notes__mimic_iv_note.radiology_detail").fetchall()}
        assert details == set(radiology)
    finally:
        con.close()


def test_an_llm_writes_one_question_per_sampled_patient_over_mimic_iv_notes(note_build):
    entry, build = note_build["entry"], note_build["build"]
    every = read_notes(note_build["layout"].warehouse, "mimic_iv_note")
    sampled = patients_asked(every, ASKED, seed=0)
    assert (entry["notes_source"], entry["patients_with_notes"], entry["patients_asked"]) == (
        "mimic_iv_note", len(every), ASKED)
    assert entry["notes_times"] == "shifted: ehrsql2024 offsets" and entry["generator"].startswith("llm:openai:")
    assert entry["kept"] == entry["generated"] == ASKED and entry["quarantined"] == 0
    assert note_build["requests"] == 2 * ASKED  # a writer and a blind call per patient
    questions = pq.read_table(build.noteqa_questions).to_pylist()
    assert sorted(q["patient_id"] for q in questions) == sorted(sampled)
    assert all(q["notes_source"] == "mimic_iv_note" and q["span_in_notes"] and q["notes_found"] for q in questions)
    # the agent-facing notes are MIMIC-IV-Note's (not labelled synthetic), in the shifted times, text untouched
    assert not build.noteqa_notes(synthetic=True).exists()
    published = {row["note_id"]: row for row in pq.read_table(build.noteqa_notes(synthetic=False)).to_pylist()}
    shifted = {note.note_id: note for found in sampled.values() for note in found}
    asked = {note_id for q in questions for note_id in q["note_ids"]}
    assert set(published) == asked <= set(shifted)
    assert all(published[i]["charttime"] == shifted[i].charttime and published[i]["text"] == shifted[i].text
               for i in asked)
    with gzip.open(build.ehrnoteqa_export / "note" / "discharge.csv.gz", "rt") as f:
        assert f.readline().strip() == "note_id,subject_id,hadm_id,note_type,note_seq,charttime,storetime,text"
