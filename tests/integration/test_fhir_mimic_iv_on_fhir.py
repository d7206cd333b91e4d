"""The mimic_iv_on_fhir FHIR view built by dbt from the MIMIC-IV demo: MIMIC-IV on FHIR's resources of every raw row
as its published conversion (kind-lab/mimic-fhir) makes them. Expected values come from the raw CSV files and the
conversion's rules written out here (ids by uuid5, New York offsets by zoneinfo), and from FHIR-AgentBench's
published gold ids; not from the view itself."""

from __future__ import annotations

import ast
import csv
import json
import random
from collections import defaultdict
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import duckdb
import pytest

from ehrbench.fhir.export import MIMIC_IV_ON_FHIR_VIEW
from ehrbench.fhir.validation import validate_resources
from tests.conftest import SHARED_DATA, mimic_fhir_id
from tests.integration.conftest import read_demo_csv

pytestmark = pytest.mark.integration

SCHEMA = "fhir__mimic_iv_on_fhir"
NEW_YORK = ZoneInfo("America/New_York")
QUESTIONS = SHARED_DATA / "fhir-agentbench" / "questions_answers_fhir.csv"
ORGANIZATION = "ee172322-118b-5716-abbc-18e4c5437e15"  # the managingOrganization of MIMIC-IV on FHIR's Patients


class View:
    """The view's resources, read per model (alias) when a test needs them: ~500k in all. dbt builds them into a file
    of their own beside the warehouse."""

    def __init__(self, warehouse):
        self.con = duckdb.connect(str(MIMIC_IV_ON_FHIR_VIEW.models_file(warehouse)), read_only=True)
        self.tables = sorted(t for (t,) in self.con.execute(
            "select table_name from information_schema.tables where table_schema = ?", [SCHEMA]).fetchall())
        self._read: dict[str, dict[str, dict]] = {}

    def ids(self, table: str) -> set[str]:
        return {i for (i,) in self.con.execute(f"select id from {SCHEMA}.{table}").fetchall()}

    def __getitem__(self, table: str) -> dict[str, dict]:
        if table not in self._read:
            self._read[table] = {i: json.loads(text) for i, text in
                                 self.con.execute(f"select id, resource from {SCHEMA}.{table}").fetchall()}
        return self._read[table]

    def union(self, columns: str) -> str:
        return " union all ".join(f"select {columns} from {SCHEMA}.{t}" for t in self.tables)


@pytest.fixture(scope="module")
def view(fhir_warehouse):
    view = View(fhir_warehouse)
    yield view
    view.con.close()


def published_time(raw: str) -> str:
    """A raw MIMIC-IV time as PostgreSQL writes it cast to timestamptz in America/New_York: a time in the
    spring-forward gap moves one hour on, an ambiguous fall-back time is standard time."""
    wall = datetime.fromisoformat(raw)
    moved = wall.replace(tzinfo=NEW_YORK).astimezone(UTC).astimezone(NEW_YORK)
    return (moved if moved.replace(tzinfo=None) != wall else wall.replace(tzinfo=NEW_YORK, fold=1)).isoformat()


def _ref(reference: dict, resource_type: str) -> str:
    kind, _, identifier = reference["reference"].partition("/")
    assert kind == resource_type
    return identifier


def test_every_raw_row_has_its_resource(view, mimic_demo_dir):
    """One resource per raw row (or key) of each table the conversion maps, with the conversion's id."""
    expected = {
        "patient": {mimic_fhir_id("Patient", r["subject_id"])
                    for r in read_demo_csv(mimic_demo_dir, "hosp/patients.csv.gz")},
        "condition": {mimic_fhir_id("Condition", f"{r['hadm_id']}-{r['seq_num']}-{r['icd_code']}")
                      for r in read_demo_csv(mimic_demo_dir, "hosp/diagnoses_icd.csv.gz")},
        "observation_labevents": {mimic_fhir_id("ObservationLabevents", r["labevent_id"])
                                  for r in read_demo_csv(mimic_demo_dir, "hosp/labevents.csv.gz")},
        "observation_outputevents": {
            mimic_fhir_id("ObservationOutputevents", f"{r['stay_id']}-{r['charttime']}-{r['itemid']}")
            for r in read_demo_csv(mimic_demo_dir, "icu/outputevents.csv.gz")},
        "observation_datetimeevents": {
            mimic_fhir_id("ObservationDatetimeevents", f"{r['stay_id']}-{r['charttime']}-{r['itemid']}")
            for r in read_demo_csv(mimic_demo_dir, "icu/datetimeevents.csv.gz")},
        "procedure_icu": {mimic_fhir_id("ProcedureICU", f"{r['stay_id']}-{r['orderid']}-{r['itemid']}")
                          for r in read_demo_csv(mimic_demo_dir, "icu/procedureevents.csv.gz")},
        "medication_dispense": {mimic_fhir_id("MedicationDispense", r["pharmacy_id"])
                                for r in read_demo_csv(mimic_demo_dir, "hosp/pharmacy.csv.gz") if r["medication"]},
        "location": {mimic_fhir_id("Location", r["careunit"])
                     for r in read_demo_csv(mimic_demo_dir, "hosp/transfers.csv.gz") if r["careunit"]},
    }
    for table, ids in expected.items():
        assert view.ids(table) == ids, table
    # chartevents: rows with a value, one per key stay_id-charttime-itemid-value, less the conversion's one literal;
    # as many resources as keys, and the ids of a seeded 20k sample of the keys (uuid5 of all 256k takes long)
    charted = sorted({f"{r['stay_id']}-{r['charttime']}-{r['itemid']}-{r['value']}"
                      for r in read_demo_csv(mimic_demo_dir, "icu/chartevents.csv.gz")
                      if r["value"] and not (r["stay_id"] == "34934165" and r["charttime"] == "2151-10-03 05:14:00")})
    charted_ids = view.ids("observation_chartevents")
    assert len(charted_ids) == len(charted)
    assert {mimic_fhir_id("ObservationChartevents", k) for k in random.Random(0).sample(charted, 20_000)} <= charted_ids
    assert view.ids("organization") == {ORGANIZATION}


def test_times_are_raw_with_their_new_york_offset(view, mimic_demo_dir):
    admissions = read_demo_csv(mimic_demo_dir, "hosp/admissions.csv.gz")
    for row in admissions:
        period = view["encounter"][mimic_fhir_id("Encounter", row["hadm_id"])]["period"]
        assert period == {"start": published_time(row["admittime"]), "end": published_time(row["dischtime"])}
    offsets = {row["admittime"][5:7]: published_time(row["admittime"])[-6:] for row in admissions}
    assert offsets["01"] == "-05:00" and offsets["07"] == "-04:00"  # both offsets occur
    labs = random.Random(0).sample(read_demo_csv(mimic_demo_dir, "hosp/labevents.csv.gz"), 500)
    for row in labs:
        observation = view["observation_labevents"][mimic_fhir_id("ObservationLabevents", row["labevent_id"])]
        assert observation["effectiveDateTime"] == published_time(row["charttime"])
        assert observation.get("issued") == (published_time(row["storetime"]) if row["storetime"] else None)
    patient = view["patient"][mimic_fhir_id("Patient", "10009628")]  # a date stays a date
    assert patient.get("deceasedDateTime", "none") == (
        next(r["dod"] for r in read_demo_csv(mimic_demo_dir, "hosp/patients.csv.gz")
             if r["subject_id"] == "10009628") or "none")


def test_lab_values_follow_the_conversions_rules(view, mimic_demo_dir):
    """valuenum, else the number after a comparator in a value without letters; else the text value, else the
    comments, else a data-absent reason; the lab specimen; an encounter only with an admission."""
    seen = defaultdict(int)
    for row in read_demo_csv(mimic_demo_dir, "hosp/labevents.csv.gz"):
        observation = view["observation_labevents"][mimic_fhir_id("ObservationLabevents", row["labevent_id"])]
        value, comparator = row["value"], None
        for sign in ("<=", "<", ">=", ">"):
            if sign in value:
                comparator = sign
                break
        if row["valuenum"]:
            kind = "number"
            assert observation["valueQuantity"]["value"] == float(row["valuenum"])
            assert observation["valueQuantity"].get("comparator") == comparator
        elif comparator and not any(c.isalpha() for c in value) and value not in ("<1>50", "150>"):
            kind = "number after a comparator"
            number = value.split(comparator, 1)[1].strip()
            assert observation["valueQuantity"] == {**observation["valueQuantity"], "value": float(number),
                                                    "comparator": comparator}
        elif value.strip() or row["comments"].strip():
            kind = "text"
            assert observation["valueString"] == (value.strip() or row["comments"].strip())
        else:
            kind = "absent"
            assert observation["dataAbsentReason"]["coding"][0]["code"] == "unknown"
        seen[kind] += 1
        assert ("encounter" in observation) == bool(row["hadm_id"])
        if row["specimen_id"]:
            assert _ref(observation["specimen"], "Specimen") == mimic_fhir_id("SpecimenLab", row["specimen_id"])
        assert observation["subject"]["reference"] == f"Patient/{mimic_fhir_id('Patient', row['subject_id'])}"
    assert seen["number"] > 50_000 and seen["text"] > 1_000 and seen["number after a comparator"] > 0, seen


def test_patients_and_encounters_carry_the_conversions_codes(view, mimic_demo_dir):
    admissions = read_demo_csv(mimic_demo_dir, "hosp/admissions.csv.gz")
    classes = {"EW EMER.": "EMER", "DIRECT EMER.": "EMER", "URGENT": "AMB", "ELECTIVE": "AMB",
               "AMBULATORY OBSERVATION": "AMB", "EU OBSERVATION": "OBSENC", "DIRECT OBSERVATION": "OBSENC",
               "OBSERVATION ADMIT": "OBSENC", "SURGICAL SAME DAY ADMISSION": "SS"}
    for row in admissions:
        encounter = view["encounter"][mimic_fhir_id("Encounter", row["hadm_id"])]
        assert encounter["class"]["code"] == classes[row["admission_type"]]
        assert encounter["identifier"][0]["value"] == row["hadm_id"]
        assert _ref(encounter["serviceProvider"], "Organization") == ORGANIZATION
    for row in read_demo_csv(mimic_demo_dir, "icu/icustays.csv.gz"):
        stay = view["encounter"][mimic_fhir_id("EncounterICU", row["stay_id"])]
        assert _ref(stay["partOf"], "Encounter") == mimic_fhir_id("Encounter", row["hadm_id"])
        assert _ref(stay["location"][0]["location"], "Location") == mimic_fhir_id("Location", row["first_careunit"])
    latest = {}
    for row in sorted(admissions, key=lambda r: r["admittime"]):
        latest[row["subject_id"]] = row
    for row in read_demo_csv(mimic_demo_dir, "hosp/patients.csv.gz"):
        patient = view["patient"][mimic_fhir_id("Patient", row["subject_id"])]
        assert patient["name"] == [{"use": "official", "family": f"Patient_{row['subject_id']}"}]
        assert patient["gender"] == {"F": "female", "M": "male"}[row["gender"]]
        assert _ref(patient["managingOrganization"], "Organization") == ORGANIZATION
        admission = latest.get(row["subject_id"])
        if admission and admission["race"] in ("WHITE", "BLACK/AFRICAN AMERICAN"):
            race = {e["url"].rsplit("-", 1)[-1]: e for e in patient["extension"]}
            assert race["race"]["extension"][0]["valueCoding"]["code"] == {"WHITE": "2106-3",
                                                                           "BLACK/AFRICAN AMERICAN": "2054-5"}[
                admission["race"]]
            assert race["ethnicity"]["extension"][0]["valueCoding"]["code"] == "2186-5"  # not Hispanic or Latino
            assert race["birthsex"]["valueCode"] == row["gender"]


def test_every_reference_resolves_and_a_sample_of_each_model_validates(view):
    assert len(view.tables) == 22
    references = view.con.execute(f"""
        with resources as ({view.union("id, resource_type, resource")}),
        refs as (select unnest(json_extract_string(resource, '$..reference')) as reference from resources)
        select count(*), count(*) filter (where reference not in (select resource_type || '/' || id from resources))
        from refs""").fetchone()
    assert references[0] > 500_000 and references[1] == 0, references
    sample = [text for table in view.tables for (text,) in view.con.execute(
        f"select resource from {SCHEMA}.{table} using sample reservoir(300 rows) repeatable (0)").fetchall()]
    report = validate_resources(iter(sample), expected=len(sample))
    assert report.checked == len(sample) > 22 * 30 and report.ok, report.failures[:5]


def test_fhir_agentbench_gold_ids_exist_in_the_view(view):
    """The goal of the view: every resource id FHIR-AgentBench's gold needs, except those whose source rows the shared
    demo lacks (its chartevents is a reconstruction: ../shared/data/README.md)."""
    if not QUESTIONS.is_file():
        pytest.skip(f"FHIR-AgentBench's question file not found at {QUESTIONS}")
    gold = defaultdict(set)
    with QUESTIONS.open(newline="") as handle:
        for row in csv.DictReader(handle):
            for kind, ids in ast.literal_eval(row["true_fhir_ids"]).items():
                gold[kind].update(ids)
    held = defaultdict(set)
    for kind, i in view.con.execute(view.union("resource_type, id")).fetchall():
        held[kind].add(i)
    missing = {kind: ids - held[kind] for kind, ids in gold.items() if ids - held[kind]}
    assert sum(map(len, gold.values())) == 27_634
    assert set(missing) <= {"Observation"} and len(missing.get("Observation", ())) <= 2, missing
