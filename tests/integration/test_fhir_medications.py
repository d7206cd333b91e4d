"""FHIR medication resources and Locations built by dbt from the MIMIC-IV demo: Medication and MedicationRequest
(prescriptions), MedicationAdministration (ICU inputevents), Location (transfers' care units) and the Encounters'
locations. Every resource validates with fhir.resources, ids are MIMIC-IV on FHIR's (recomputed here from the raw
CSV files), every reference resolves, and the resources show the SQL profiles' rows and times with MIMIC-IV's
original values."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from ehrbench.fhir.validation import validate_resources
from ehrbench.warehouse import connect
from tests.conftest import mimic_fhir_id
from tests.integration.conftest import read_demo_csv

pytestmark = pytest.mark.integration

INT = "int_ehrsql2024__mimic_iv.int_ehrsql2024__mimic_iv__"
NEW_TABLES = ("medication", "medication_request", "medication_administration", "location")
MODELS = ("fhir__mimic_iv__patient", "fhir__mimic_iv__encounter", "fhir__mimic_iv__medication",
          "fhir__mimic_iv__medication_request", "fhir__mimic_iv__medication_administration",
          "fhir__mimic_iv__location")


@pytest.fixture(scope="module")
def warehouse(fhir_warehouse):
    return fhir_warehouse


@pytest.fixture(scope="module")
def resources(fhir_resources) -> dict[str, dict[str, dict]]:
    return fhir_resources


def _drug_key(row: dict[str, str]) -> str:
    """drug[--formulary_drug_cd][--ndc] of raw CSV values, as MIMIC-IV on FHIR's SQL (an ndc of '0' is absent)."""
    key = row["drug"]
    if row["formulary_drug_cd"]:
        key += "--" + row["formulary_drug_cd"]
    if row["ndc"] not in ("", "0"):
        key += "--" + row["ndc"].zfill(11)
    return key


def _ref(reference: dict, resource_type: str) -> str:
    prefix, _, target = reference["reference"].partition("/")
    assert prefix == resource_type
    return target


def test_every_resource_validates(warehouse):
    with connect(warehouse, read_only=True) as con:
        texts = [t for table in (*NEW_TABLES, "encounter")
                 for (t,) in con.execute(f"select resource from fhir__mimic_iv.{table}").fetchall()]
        columns = {table: [c for (c,) in con.execute(
            "select column_name from information_schema.columns where table_schema = 'fhir__mimic_iv' "
            "and table_name = ? order by ordinal_position", [table]).fetchall()] for table in NEW_TABLES}
    report = validate_resources(texts, expected=len(texts))
    assert report.checked == len(texts) > 10_000
    assert report.ok, report.failures
    for table in NEW_TABLES:
        assert columns[table] == ["id", "resource_type", "patient_id", "source_table", "source_key", "resource"]


def test_counts_follow_the_intermediate_rows(warehouse, resources):
    with connect(warehouse, read_only=True) as con:
        n_pharmacy_ids, = con.execute(
            f"select count(distinct source_key->>'pharmacy_id') from {INT}prescriptions").fetchone()
        n_inputs, = con.execute(f"select count(*) from {INT}inputevents").fetchone()
        n_care_units, = con.execute(
            f"select count(distinct s.careunit) from {INT}transfers as t "
            f"join staging_mimic_iv.stg_mimic_iv__transfers as s on s.transfer_id = t.transfer_id").fetchone()
        drug_keys = con.execute(
            "select drug, formulary_drug_cd, ndc, pharmacy_id from raw_mimic_iv.prescriptions "
            f"where pharmacy_id in (select cast(source_key->>'pharmacy_id' as integer) from {INT}prescriptions)"
        ).fetchall()
        null_patients = {table: con.execute(f"select count(*) filter (where patient_id is not null) "
                                            f"from fhir__mimic_iv.{table}").fetchone()[0]
                         for table in ("medication", "location")}
    # one request per pharmacy_id (a pharmacy_id with a drug and its base bag has two intermediate rows)
    assert len(resources["medication_request"]) == n_pharmacy_ids > 1000
    assert len(resources["medication_administration"]) == n_inputs > 1000
    assert len(resources["location"]) == n_care_units > 10
    # one Medication per distinct drug key of the requested prescriptions, plus one per distinct mix of drugs
    rows = [dict(zip(("drug", "formulary_drug_cd", "ndc"), (d or "", f or "", n or ""), strict=True))
            for d, f, n, _ in drug_keys]
    by_pharmacy = defaultdict(list)
    for row, (*_, pharmacy_id) in zip(rows, drug_keys, strict=True):
        by_pharmacy[pharmacy_id].append(_drug_key(row))
    n_mixes = len({tuple(sorted(keys)) for keys in by_pharmacy.values() if len(keys) > 1})
    assert len(resources["medication"]) == len({_drug_key(row) for row in rows}) + n_mixes
    assert n_mixes > 10
    assert null_patients == {"medication": 0, "location": 0}


def test_ids_recomputed_by_hand_from_the_csv_files(mimic_demo_dir, warehouse, resources):
    with connect(warehouse, read_only=True) as con:
        requested = {int(p) for (p,) in con.execute(
            f"select source_key->>'pharmacy_id' from {INT}prescriptions").fetchall()}
        input_keys = {tuple(json.loads(k).values()) for (k,) in con.execute(
            f"select source_key from {INT}inputevents").fetchall()}
    prescriptions = defaultdict(list)
    for row in read_demo_csv(mimic_demo_dir, "hosp/prescriptions.csv.gz"):
        if int(row["pharmacy_id"]) in requested:
            prescriptions[int(row["pharmacy_id"])].append(row)
    requests, medications = resources["medication_request"], resources["medication"]

    # a single-drug request and its Medication; among them a raw drug name with surrounding whitespace (the key
    # keeps it, as MIMIC-IV on FHIR's SQL reads the raw value)
    singles = [rows[0] for rows in prescriptions.values() if len(rows) == 1 and rows[0]["ndc"] not in ("", "0")]
    padded = [rows[0] for rows in prescriptions.values()
              if len(rows) == 1 and rows[0]["drug"] != rows[0]["drug"].strip()]
    assert singles and padded
    for row in (singles[0], padded[0]):
        request = requests[mimic_fhir_id("MedicationRequest", row["pharmacy_id"])]
        assert request["identifier"][0]["value"] == row["pharmacy_id"]
        medication = medications[mimic_fhir_id("MedicationPrescriptions", _drug_key(row))]
        assert _ref(request["medicationReference"], "Medication") == medication["id"]
        assert medication["code"]["text"] == row["drug"].strip()
        if row["ndc"] not in ("", "0"):
            assert {"system": "http://hl7.org/fhir/sid/ndc", "code": row["ndc"]} in medication["code"]["coding"]

    # a mix (drug + base bag): keys joined by '_' in drug_type order MAIN, BASE, ADDITIVE
    mixes = [rows for rows in prescriptions.values()
             if sorted(r["drug_type"] for r in rows) == ["BASE", "MAIN"]]
    assert mixes
    rows = sorted(mixes[0], key=lambda r: r["drug_type"], reverse=True)
    mix_id = mimic_fhir_id("MedicationPrescriptions", "_".join(_drug_key(r) for r in rows))
    assert _ref(requests[mimic_fhir_id("MedicationRequest", rows[0]["pharmacy_id"])]["medicationReference"],
                "Medication") == mix_id
    assert [_ref(i["itemReference"], "Medication") for i in medications[mix_id]["ingredient"]] == [
        mimic_fhir_id("MedicationPrescriptions", _drug_key(r)) for r in rows]

    # an ICU input: stay_id-orderid-itemid
    row = next(r for r in read_demo_csv(mimic_demo_dir, "icu/inputevents.csv.gz")
               if (int(r["stay_id"]), int(r["orderid"]), int(r["itemid"])) in input_keys)
    administration = resources["medication_administration"][
        mimic_fhir_id("MedicationAdministrationICU", f"{row['stay_id']}-{row['orderid']}-{row['itemid']}")]
    assert administration["medicationCodeableConcept"]["coding"][0]["code"] == row["itemid"]
    assert _ref(administration["context"], "Encounter") == mimic_fhir_id("EncounterICU", row["stay_id"])

    # a care unit
    assert resources["location"][mimic_fhir_id("Location", "Medical Intensive Care Unit (MICU)")]["name"] == (
        "Medical Intensive Care Unit (MICU)")


def test_references_resolve(resources):
    medications, encounters, patients = resources["medication"], resources["encounter"], resources["patient"]
    locations = resources["location"]
    for request in resources["medication_request"].values():
        assert _ref(request["medicationReference"], "Medication") in medications
        assert _ref(request["encounter"], "Encounter") in encounters
        assert _ref(request["subject"], "Patient") in patients
    for medication in medications.values():
        for ingredient in medication.get("ingredient", []):
            assert _ref(ingredient["itemReference"], "Medication") in medications
    for administration in resources["medication_administration"].values():
        context = encounters[_ref(administration["context"], "Encounter")]
        assert context["class"]["code"] == "ACUTE"  # the ICU stay's Encounter
        assert context["subject"] == administration["subject"]
    referenced = {_ref(entry["location"], "Location")
                  for encounter in encounters.values() for entry in encounter.get("location", [])}
    assert referenced == set(locations)  # every care unit is visited, every visited one exists
    assert all(_ref(e["location"][0]["location"], "Location") in locations
               for e in encounters.values() if e["class"]["code"] == "ACUTE" and "location" in e)


def test_original_casing_and_profile_times(warehouse, resources):
    with connect(warehouse, read_only=True) as con:
        # the ehrsql2024 profile's rows, with their MIMIC-IV key from the lineage
        profile = con.execute(
            "select l.source_key->>'pharmacy_id', p.drug, strftime(p.starttime, '%Y-%m-%dT%H:%M:%S') "
            "from ehrsql2024__mimic_iv.prescriptions as p "
            "join lineage.ehrsql2024__mimic_iv as l on l.table_name = 'prescriptions' and l.row_id = p.row_id"
        ).fetchall()
    assert len(profile) > 1000
    requests, medications = resources["medication_request"], resources["medication"]
    names = set()
    for pharmacy_id, drug, starttime in profile:
        request = requests[mimic_fhir_id("MedicationRequest", pharmacy_id)]
        assert request["authoredOn"] == f"{starttime}-04:00"
        assert request["dispenseRequest"]["validityPeriod"]["start"] == request["authoredOn"]
        medication = medications[_ref(request["medicationReference"], "Medication")]
        if "code" in medication:  # a single drug: its original-case name; the SQL profile lower-cases it
            assert medication["code"]["text"].lower() == drug
            names.add(medication["code"]["text"])
    assert {"Acetaminophen", "ALPRAZolam"} <= names and not names & {"acetaminophen", "alprazolam"}


def test_encounter_locations_follow_the_transfers_in_time(warehouse, resources):
    with connect(warehouse, read_only=True) as con:
        transfers = con.execute(
            f"select t.hadm_id, s.careunit, strftime(t.intime, '%Y-%m-%dT%H:%M:%S-04:00') from {INT}transfers as t "
            "join staging_mimic_iv.stg_mimic_iv__transfers as s on s.transfer_id = t.transfer_id "
            "where s.careunit is not null order by t.hadm_id, t.intime, t.transfer_id").fetchall()
    expected = defaultdict(list)
    for hadm_id, careunit, intime in transfers:
        expected[hadm_id].append((careunit, intime))
    hospital = {int(e["identifier"][0]["value"]): e for e in resources["encounter"].values()
                if e["class"]["code"] == "IMP"}
    assert sum(1 for e in hospital.values() if len(e.get("location", [])) > 1) > 10
    for hadm_id, encounter in hospital.items():
        entries = encounter.get("location")
        if hadm_id not in expected:
            assert entries is None  # no empty list
            continue
        assert [(e["location"]["display"], e["period"]["start"]) for e in entries] == expected[hadm_id]
        starts = [e["period"]["start"] for e in entries]
        assert starts == sorted(starts)
        for entry in entries:
            assert _ref(entry["location"], "Location") == mimic_fhir_id("Location", entry["location"]["display"])
            assert "end" not in entry["period"] or entry["period"]["end"] >= entry["period"]["start"]
