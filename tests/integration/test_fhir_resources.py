"""FHIR Patient, Encounter, Condition and Procedure resources built by dbt from the MIMIC-IV demo: every resource
validates with fhir.resources, ids are MIMIC-IV on FHIR's, references resolve, and they cover exactly the SQL
profiles' rows. (Observations and Specimens: test_fhir_observations.py; medications and locations:
test_fhir_medications.py.)"""

from __future__ import annotations

import json

import pytest

from ehrbench.fhir.ids import key_of, resource_id
from ehrbench.fhir.validation import validate_resources
from ehrbench.warehouse import connect

pytestmark = pytest.mark.integration

RESOURCE_TABLES = ("patient", "encounter", "condition", "procedure")


@pytest.fixture(scope="module")
def warehouse(fhir_warehouse):
    return fhir_warehouse


def _resources(con, table: str) -> list[dict]:
    return [json.loads(text) for (text,) in con.execute(f"select resource from fhir__mimic_iv.{table}").fetchall()]


def test_every_resource_validates(warehouse):
    with connect(warehouse, read_only=True) as con:
        texts = [t for table in RESOURCE_TABLES
                 for (t,) in con.execute(f"select resource from fhir__mimic_iv.{table}").fetchall()]
    report = validate_resources(texts)
    assert report.checked == len(texts) > 100
    assert report.ok, report.failures


def test_every_model_of_the_view_has_a_test_that_validates_all_its_demo_resources():
    """A build validates a sample of its patients' resources (ehrbench.fhir.export.EHRSQL_ALIGNED_VIEW), because
    these tests validate every resource each model gives on the MIMIC-IV demo: none may be left out."""
    from ehrbench.transform import PROJECT_DIR
    from tests.integration import test_fhir_medications, test_fhir_observations

    models = {path.stem.removeprefix("fhir__mimic_iv__")
              for path in (PROJECT_DIR / "models" / "fhir" / "mimic_iv").glob("fhir__mimic_iv__*.sql")}
    validated = {*RESOURCE_TABLES, *test_fhir_observations.NEW_TABLES, *test_fhir_medications.NEW_TABLES}
    assert len(models) == 15 and validated == models


def test_patients_are_the_cohort_with_mimic_iv_on_fhir_ids(warehouse):
    with connect(warehouse, read_only=True) as con:
        subjects = [s for (s,) in con.execute("select subject_id from ehrsql2024__mimic_iv.patients").fetchall()]
        patients = _resources(con, "patient")
        dob = dict(con.execute("select subject_id, strftime(dob, '%Y-%m-%d') from ehrsql2024__mimic_iv.patients")
                   .fetchall())
    assert len(subjects) == 94
    by_id = {p["id"]: p for p in patients}
    assert set(by_id) == {resource_id("Patient", s) for s in subjects}
    for subject in subjects:  # the FHIR view shows the same shifted dates as the SQL databases
        patient = by_id[resource_id("Patient", subject)]
        assert patient["identifier"][0]["value"] == str(subject)
        assert patient["birthDate"] == dob[subject]
        assert patient["gender"] in ("male", "female")


def test_encounters_reference_their_patient_and_admission(warehouse):
    with connect(warehouse, read_only=True) as con:
        encounters = _resources(con, "encounter")
        patient_ids = {p["id"] for p in _resources(con, "patient")}
        admissions = con.execute("select hadm_id, dischtime is null from ehrsql2024__mimic_iv.admissions").fetchall()
        stays = [s for (s,) in con.execute("select stay_id from ehrsql2024__mimic_iv.icustays").fetchall()]
    hospital = {e["id"]: e for e in encounters if e["class"]["code"] == "IMP"}
    icu = [e for e in encounters if e["class"]["code"] == "ACUTE"]
    assert set(hospital) == {resource_id("Encounter", hadm) for hadm, _ in admissions}
    assert {e["id"] for e in icu} == {resource_id("EncounterICU", stay) for stay in stays}
    for encounter in encounters:
        assert encounter["subject"]["reference"].removeprefix("Patient/") in patient_ids
    for stay in icu:
        parent = hospital[stay["partOf"]["reference"].removeprefix("Encounter/")]
        assert parent["subject"] == stay["subject"]
        # (an ICU stay may begin shortly before the recorded admission time: ED boarding, real MIMIC-IV data)
        assert "end" not in parent["period"] or stay["period"]["start"] <= parent["period"]["end"]
    current = {resource_id("Encounter", hadm) for hadm, is_current in admissions if is_current}
    assert current and {i for i, e in hospital.items() if e["status"] == "in-progress"} == current
    assert all("end" not in hospital[i]["period"] for i in current)


def test_coded_events_keep_raw_codes_titles_and_references(warehouse):
    with connect(warehouse, read_only=True) as con:
        encounter_ids = {e["id"] for e in _resources(con, "encounter")}
        for table, events, system in (("condition", "diagnoses_icd", "mimic-diagnosis-icd"),
                                      ("procedure", "procedures_icd", "mimic-procedure-icd")):
            resources = {r["id"]: r for r in _resources(con, table)}
            rows = con.execute(
                f"select e.hadm_id, e.source_key->>'seq_num', e.source_key->>'icd_code', e.icd_version, d.long_title "
                f"from int_ehrsql2024__mimic_iv.int_ehrsql2024__mimic_iv__{events} as e "
                f"join staging_mimic_iv.stg_mimic_iv__d_icd_{'diagnoses' if table == 'condition' else 'procedures'} "
                f"as d on d.icd_code = (e.source_key->>'icd_code') and d.icd_version = e.icd_version").fetchall()
            assert len(rows) == len(resources) > 100
            for hadm_id, seq_num, icd_code, version, title in rows:
                resource = resources[resource_id(table.capitalize(), key_of(hadm_id, seq_num, icd_code))]
                assert resource["code"]["coding"] == [{"system": f"http://mimic.mit.edu/fhir/mimic/CodeSystem/"
                                                                 f"{system}{version}", "code": icd_code,
                                                       "display": title}]
                assert resource["encounter"]["reference"] == f"Encounter/{resource_id('Encounter', hadm_id)}"
                assert resource["encounter"]["reference"].removeprefix("Encounter/") in encounter_ids


def test_every_resource_type_round_trips_through_fhir_resources(warehouse):
    from fhir.resources.R4B import get_fhir_model_class

    with connect(warehouse, read_only=True) as con:
        tables = [t for (t,) in con.execute("select table_name from information_schema.tables "
                                            "where table_schema = 'fhir__mimic_iv'").fetchall()]
        texts = [row for table in tables for row in con.execute(
            f"select resource_type, resource from fhir__mimic_iv.{table} order by id limit 300").fetchall()]
    types = {resource_type for resource_type, _ in texts}
    assert types == {"Patient", "Encounter", "Condition", "Procedure", "Observation", "Specimen", "Medication",
                     "MedicationRequest", "MedicationAdministration", "Location"}
    for resource_type, text in texts:  # parsed and written back by the FHIR models: nothing lost or changed
        model = get_fhir_model_class(resource_type).model_validate_json(text)
        assert json.loads(model.model_dump_json(exclude_none=True)) == json.loads(text), text[:200]
