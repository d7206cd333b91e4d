"""MIMIC-IV-Note as an optional build source: its release layout (mimic-code's DDL), the ingest of a release the tests
write (texts with line breaks, quotes and commas survive byte for byte; checksums verified), the build parameters that
ask for it, and the seeded choice of the patients asked about."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ehrbench.errors import ConfigError, SourceError
from ehrbench.noteqa.records import DischargeNote
from ehrbench.noteqa.suite import patients_asked
from ehrbench.parameter_errors import ParameterError, one_line_errors
from ehrbench.settings import BuildParameters
from ehrbench.sources.ingest import ingest_release
from ehrbench.sources.releases import release_for
from tests.mimic_iv_note_release import NOTE_RELEASE, discharge_text, write_note_release


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch):
    for name in ("MIMIC_IV_NOTE_DIR", "MIMIC_IV_NOTE_URL", "NOTE_QUESTION_MODEL"):
        monkeypatch.delenv(f"EHRBENCH_{name}", raising=False)


def test_the_release_is_physionets_credentialed_2_2_with_its_note_folder():
    assert NOTE_RELEASE.base_url == "https://physionet.org/files/mimic-iv-note/2.2/"
    assert NOTE_RELEASE.credentialed and NOTE_RELEASE.slug == "mimic-iv-note-full-2.2"
    assert {spec.name: (spec.path, spec.required) for spec in NOTE_RELEASE.tables} == {
        "discharge": ("note/discharge.csv.gz", True),
        "discharge_detail": ("note/discharge_detail.csv.gz", False),
        "radiology": ("note/radiology.csv.gz", False),
        "radiology_detail": ("note/radiology_detail.csv.gz", False)}
    with pytest.raises(ConfigError, match=r"mimic_iv_note/demo.*edition in \['full'\]"):
        release_for("mimic_iv_note", "demo")  # there is no open demo of the notes


def test_the_columns_are_mimic_codes_ddl_in_file_order():
    # mimic-code mimic-iv-note/buildmimic/postgres/create.sql
    note = [("note_id", "VARCHAR"), ("subject_id", "INTEGER"), ("hadm_id", "INTEGER"), ("note_type", "VARCHAR"),
            ("note_seq", "SMALLINT"), ("charttime", "TIMESTAMP"), ("storetime", "TIMESTAMP"), ("text", "VARCHAR")]
    detail = [("note_id", "VARCHAR"), ("subject_id", "INTEGER"), ("field_name", "VARCHAR"),
              ("field_value", "VARCHAR"), ("field_ordinal", "INTEGER")]
    assert list(NOTE_RELEASE.table("discharge").columns) == note == list(NOTE_RELEASE.table("radiology").columns)
    assert list(NOTE_RELEASE.table("discharge_detail").columns) == detail
    assert list(NOTE_RELEASE.table("radiology_detail").columns) == detail
    assert NOTE_RELEASE.table("discharge").qualified_name == "raw_mimic_iv_note.discharge"


def _discharge(note_id="10000032-DS-21", text=None):
    return {"note_id": note_id, "subject_id": 10000032, "hadm_id": 22595853, "note_type": "DS", "note_seq": 21,
            "charttime": "2180-05-07 00:00:00", "storetime": "2180-05-09 15:26:00",
            "text": text or discharge_text("Home", 'cough, "fever"')}


def test_notes_load_byte_for_byte_verified_and_absent_tables_are_empty(warehouse, tmp_path):
    text = discharge_text("Home With Service", 'worsening "ABDOMINAL" distension, pain')
    root = write_note_release(tmp_path / "note-release", {
        "discharge": [_discharge(text=text), _discharge("10000032-DS-22", "one line")],
        "discharge_detail": [{"note_id": "10000032-DS-21", "subject_id": 10000032, "field_name": "author",
                              "field_value": "___", "field_ordinal": 1}]})
    files = {f.table: f for f in ingest_release(warehouse, NOTE_RELEASE, root, origin="local",
                                                strict_checksums=True)}
    assert {t: (f.status, f.rows) for t, f in files.items()} == {
        "discharge": ("verified", 2), "discharge_detail": ("verified", 1), "radiology": ("absent", 0),
        "radiology_detail": ("absent", 0)}
    loaded = warehouse.execute("select text, charttime, note_seq from raw_mimic_iv_note.discharge "
                               "order by note_id").fetchall()
    assert loaded[0][0] == text and "\n" in text and '"ABDOMINAL"' in text
    assert str(loaded[0][1]) == "2180-05-07 00:00:00" and loaded[0][2] == 21
    assert warehouse.execute("select count(*) from raw_mimic_iv_note.radiology").fetchone() == (0,)


def test_a_release_without_its_discharge_file_is_refused_by_name(warehouse, tmp_path):
    root = write_note_release(tmp_path / "note-release", {"radiology": []})
    with pytest.raises(SourceError, match=r"required mimic_iv_note table\(s\) missing: discharge "
                                          r"\(note/discharge\.csv\.gz\)"):
        ingest_release(warehouse, NOTE_RELEASE, root, origin="local")


def test_real_notes_are_asked_for_by_a_directory_or_by_name_and_need_a_question_writer(tmp_path, monkeypatch):
    assert BuildParameters().notes_source == "synthetic"
    model = {"note_question_model": "openai:gpt-4o-mini"}
    given = BuildParameters(mimic_iv_note_dir=tmp_path, questions=model)
    assert given.notes_source == "mimic_iv_note"
    assert BuildParameters(notes="mimic_iv_note", questions=model).notes_source == "mimic_iv_note"  # downloaded
    with pytest.raises(ParameterError, match="notes from MIMIC-IV-Note need a note-question model") as refused, \
            one_line_errors(BuildParameters):
        BuildParameters.from_environment(mimic_iv_note_dir=tmp_path)
    assert "\n" not in str(refused.value)
    with pytest.raises(ValidationError, match="contradicts mimic_iv_note_dir"):
        BuildParameters(notes="synthetic", mimic_iv_note_dir=tmp_path)
    monkeypatch.setenv("EHRBENCH_MIMIC_IV_NOTE_DIR", str(tmp_path))
    monkeypatch.setenv("EHRBENCH_NOTE_QUESTION_MODEL", "openai:gpt-4o-mini")
    from_env = BuildParameters.from_environment()
    assert (from_env.mimic_iv_note_dir, from_env.notes_source) == (tmp_path, "mimic_iv_note")
    # an explicit notes='synthetic' wins over the environment's directory
    synthetic = BuildParameters.from_environment(notes="synthetic")
    assert (synthetic.mimic_iv_note_dir, synthetic.notes_source) == (None, "synthetic")


def _notes(subjects):
    return {s: [DischargeNote(f"{s}-DS-1", s, s * 10, 1, "2100-01-01 00:00:00", "x")] for s in subjects}


def test_the_patients_asked_are_every_patient_or_a_seeded_sample():
    notes = _notes(range(1, 51))
    assert patients_asked(notes, 50, seed=0) == notes
    sample = patients_asked(notes, 10, seed=0)
    assert len(sample) == 10 and list(sample) == sorted(sample) and set(sample) < set(notes)
    assert all(sample[s] == notes[s] for s in sample)
    assert patients_asked(notes, 10, seed=0) == sample  # the seed decides
    assert any(patients_asked(notes, 10, seed=seed) != sample for seed in (1, 2, 3))


def test_the_credentialed_release_downloads_with_physionet_credentials_and_verifies(file_server, monkeypatch,
                                                                                   tmp_path):
    from ehrbench.sources.download import download_release

    write_note_release(file_server.root, {"discharge": [_discharge()], "radiology": []})
    monkeypatch.setenv("EHRBENCH_MIMIC_IV_NOTE_URL", file_server.url)
    monkeypatch.setenv("PHYSIONET_USERNAME", "reader")
    monkeypatch.setenv("PHYSIONET_PASSWORD", "secret")
    release = release_for("mimic_iv_note", "full")
    dest = download_release(release, tmp_path / "raw" / release.slug)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*.gz")) == [
        "note/discharge.csv.gz", "note/radiology.csv.gz"]  # the optional detail tables are not on the server
    assert (dest / "note/discharge.csv.gz").read_bytes() == (file_server.root / "note/discharge.csv.gz").read_bytes()
    assert file_server.requests and all(request.authorization for request in file_server.requests)
