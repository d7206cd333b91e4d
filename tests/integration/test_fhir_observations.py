"""FHIR Observations (labevents, chartevents vital signs, outputevents, microbiology test / organism /
susceptibility) and microbiology Specimens built by dbt from the MIMIC-IV demo: every resource validates with
fhir.resources, ids are MIMIC-IV on FHIR's (recomputed here with uuid5 from the raw CSV files), the resources cover
exactly the SQL profiles' rows at the profiles' shifted times, every reference resolves, and values keep MIMIC-IV's
original case."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest

from ehrbench.fhir.validation import validate_resources
from ehrbench.warehouse import connect
from tests.conftest import mimic_fhir_id
from tests.integration.conftest import read_demo_csv

pytestmark = pytest.mark.integration

INT = "int_ehrsql2024__mimic_iv.int_ehrsql2024__mimic_iv__"
OBSERVATION_TABLES = ("observation_labevents", "observation_chartevents", "observation_outputevents",
                      "observation_micro_test", "observation_micro_org", "observation_micro_susc")
NEW_TABLES = (*OBSERVATION_TABLES, "specimen")
VITALS = {"223762", "220277", "220045", "220210", "220050", "220051", "220052", "224639", "226730"}
MIMIC = "http://mimic.mit.edu/fhir/mimic/CodeSystem/"


@pytest.fixture(scope="module")
def warehouse(fhir_warehouse):
    return fhir_warehouse


@pytest.fixture(scope="module")
def resources(fhir_resources) -> dict[str, dict[str, dict]]:
    return fhir_resources


@pytest.fixture(scope="module")
def micro_csv(mimic_demo_dir) -> dict[str, dict[str, str]]:
    """microevent_id -> raw microbiologyevents row."""
    return {row["microevent_id"]: row for row in read_demo_csv(mimic_demo_dir, "hosp/microbiologyevents.csv.gz")}


@pytest.fixture(scope="module")
def profile_micro(warehouse, micro_csv) -> list[dict[str, str]]:
    """The raw rows of the profiles' microbiology events."""
    with connect(warehouse, read_only=True) as con:
        ids = [m for (m,) in con.execute(f"select source_key->>'microevent_id' from {INT}microbiologyevents")
               .fetchall()]
    return [micro_csv[m] for m in ids]


def _ref(reference: dict, resource_type: str) -> str:
    prefix = f"{resource_type}/"
    assert reference["reference"].startswith(prefix), reference
    return reference["reference"].removeprefix(prefix)


def _coding(resource: dict, element: str = "code") -> dict:
    (coding,) = resource[element]["coding"]
    return coding


def test_every_new_resource_validates(warehouse):
    with connect(warehouse, read_only=True) as con:
        rows = [(table, kind, text) for table in NEW_TABLES
                for kind, text in con.execute(f"select resource_type, resource from fhir__mimic_iv.{table}").fetchall()]
    assert all(json.loads(text)["resourceType"] == kind for _, kind, text in rows)
    assert Counter(table for table, _, _ in rows).keys() == set(NEW_TABLES)
    report = validate_resources((text for _, _, text in rows), expected=len(rows))
    assert report.checked == len(rows) > 60_000
    assert report.ok, report.failures[:5]


def test_lab_ids_are_mimic_iv_on_fhir_ids_of_the_raw_rows(resources, mimic_demo_dir):
    labs = {row["labevent_id"]: row for row in read_demo_csv(mimic_demo_dir, "hosp/labevents.csv.gz")}
    labels = {row["itemid"]: row["label"] for row in read_demo_csv(mimic_demo_dir, "hosp/d_labitems.csv.gz")}
    # the published check (docs/benchmarks.md#fhir-resource-ids): labevent_id 222161, patient 10018845, phosphate
    raw = labs["222161"]
    assert (raw["subject_id"], raw["itemid"], raw["charttime"]) == ("10018845", "50970", "2184-10-10 06:30:00")
    assert mimic_fhir_id("ObservationLabevents", "222161") == "a8407c1c-7737-5d0a-9209-168158821204"
    observation = resources["observation_labevents"]["a8407c1c-7737-5d0a-9209-168158821204"]
    assert _ref(observation["subject"], "Patient") == mimic_fhir_id("Patient", "10018845")
    assert _ref(observation["encounter"], "Encounter") == mimic_fhir_id("Encounter", raw["hadm_id"])
    assert _coding(observation) == {"system": f"{MIMIC}mimic-d-labitems", "code": "50970", "display": "Phosphate"}
    assert observation["valueQuantity"]["value"] == float(raw["valuenum"])
    assert observation["valueQuantity"]["unit"] == raw["valueuom"] == "mg/dL"  # original case (profile: mg/dl)
    assert observation["referenceRange"] == [{
        bound: {"value": float(raw[f"ref_range_{side}"]), "unit": "mg/dL", "system": f"{MIMIC}mimic-units",
                "code": "mg/dL"} for bound, side in (("low", "lower"), ("high", "upper"))}]
    # every lab Observation is a raw row's: its id, code, label and unit from the CSV files
    by_id = {mimic_fhir_id("ObservationLabevents", labevent_id): row for labevent_id, row in labs.items()}
    for observation_id, observation in resources["observation_labevents"].items():
        raw = by_id[observation_id]
        assert observation["identifier"][0]["value"] == raw["labevent_id"]
        assert _coding(observation) == {"system": f"{MIMIC}mimic-d-labitems", "code": raw["itemid"],
                                        "display": labels[raw["itemid"]].strip()}
        assert observation["valueQuantity"]["value"] == float(raw["valuenum"])
        assert observation["valueQuantity"].get("unit") == (raw["valueuom"].strip() or None)
        assert _ref(observation["subject"], "Patient") == mimic_fhir_id("Patient", raw["subject_id"])
        assert ("interpretation" in observation) == (raw["flag"] == "abnormal")


def test_chart_and_output_ids_are_mimic_iv_on_fhir_ids_of_the_raw_rows(resources, mimic_demo_dir):
    items = {row["itemid"]: row for row in read_demo_csv(mimic_demo_dir, "icu/d_items.csv.gz")}
    # chartevents: stay_id-charttime-itemid-value, raw text as PostgreSQL prints it (charttime 'YYYY-MM-DD HH:MM:SS')
    charts = {mimic_fhir_id("ObservationChartevents",
                            "-".join(row[c] for c in ("stay_id", "charttime", "itemid", "value"))): row
              for row in read_demo_csv(mimic_demo_dir, "icu/chartevents.csv.gz") if row["itemid"] in VITALS}
    assert resources["observation_chartevents"]
    for observation_id, observation in resources["observation_chartevents"].items():
        raw = charts[observation_id]
        assert _coding(observation) == {"system": f"{MIMIC}mimic-chartevents-d-items", "code": raw["itemid"],
                                        "display": items[raw["itemid"]]["label"].strip()}
        assert observation["valueQuantity"]["value"] == float(raw["valuenum"])
        assert observation["valueQuantity"]["unit"] == raw["valueuom"]  # e.g. 'mmHg', '°C' (profile: mmhg, °c)
        assert _ref(observation["encounter"], "Encounter") == mimic_fhir_id("EncounterICU", raw["stay_id"])
        assert observation["category"][0]["coding"][0]["code"] == "vital-signs"
    # outputevents: stay_id-charttime-itemid
    outputs = {mimic_fhir_id("ObservationOutputevents",
                             "-".join((row["stay_id"], row["charttime"], row["itemid"]))): row
               for row in read_demo_csv(mimic_demo_dir, "icu/outputevents.csv.gz")}
    assert resources["observation_outputevents"]
    for observation_id, observation in resources["observation_outputevents"].items():
        raw = outputs[observation_id]
        assert _coding(observation) == {"system": f"{MIMIC}mimic-d-items", "code": raw["itemid"],
                                        "display": items[raw["itemid"]]["label"].strip()}
        assert observation["valueQuantity"]["value"] == float(raw["value"])
        assert observation["valueQuantity"]["unit"] == raw["valueuom"]
        assert _ref(observation["encounter"], "Encounter") == mimic_fhir_id("EncounterICU", raw["stay_id"])


def test_microbiology_ids_are_mimic_iv_on_fhir_ids_of_the_raw_rows(resources, profile_micro):
    specimens = {mimic_fhir_id("SpecimenMicro", row["micro_specimen_id"]): row for row in profile_micro}
    tests = {mimic_fhir_id("ObservationMicroTest", f"{row['micro_specimen_id']}-{row['test_itemid']}"): row
             for row in profile_micro}
    # MIMIC-IV on FHIR's organism key puts the test first: test_itemid-micro_specimen_id-org_itemid
    organisms = {mimic_fhir_id("ObservationMicroOrg",
                               f"{row['test_itemid']}-{row['micro_specimen_id']}-{row['org_itemid']}"): row
                 for row in profile_micro if row["org_itemid"]}
    susceptibilities = {mimic_fhir_id("ObservationMicroSusc", row["microevent_id"]): row
                        for row in profile_micro if row["ab_itemid"]}
    assert set(resources["specimen"]) == set(specimens)
    assert set(resources["observation_micro_test"]) == set(tests)
    assert set(resources["observation_micro_org"]) == set(organisms)
    assert set(resources["observation_micro_susc"]) == set(susceptibilities)
    for specimen_id, specimen in resources["specimen"].items():
        raw = specimens[specimen_id]
        assert specimen["identifier"][0]["value"] == raw["micro_specimen_id"]
        assert specimen["type"]["text"] == raw["spec_type_desc"].strip()
        assert _ref(specimen["subject"], "Patient") == mimic_fhir_id("Patient", raw["subject_id"])
    for test_id, test in resources["observation_micro_test"].items():
        raw = tests[test_id]
        assert _coding(test) == {"system": f"{MIMIC}mimic-microbiology-test", "code": raw["test_itemid"],
                                 "display": raw["test_name"].strip()}  # staging trims
        assert _ref(test["specimen"], "Specimen") == mimic_fhir_id("SpecimenMicro", raw["micro_specimen_id"])
        assert _ref(test["encounter"], "Encounter") == mimic_fhir_id("Encounter", raw["hadm_id"])
    for organism_id, organism in resources["observation_micro_org"].items():
        raw = organisms[organism_id]
        assert _coding(organism) == {"system": f"{MIMIC}mimic-microbiology-organism", "code": raw["org_itemid"],
                                     "display": raw["org_name"].strip()}
    interpretations = {"S": "S", "R": "R", "I": "IND", "P": "IE"}
    for susceptibility_id, susceptibility in resources["observation_micro_susc"].items():
        raw = susceptibilities[susceptibility_id]
        assert _coding(susceptibility) == {"system": f"{MIMIC}mimic-microbiology-antibiotic",
                                           "code": raw["ab_itemid"], "display": raw["ab_name"].strip()}
        assert _coding(susceptibility, "valueCodeableConcept")["code"] == interpretations[raw["interpretation"]]
        if raw["dilution_value"]:
            (dilution,) = susceptibility["extension"]
            assert dilution["valueQuantity"]["value"] == float(raw["dilution_value"])


def test_counts_are_the_profiles_rows_and_keys(warehouse, resources, profile_micro):
    with connect(warehouse, read_only=True) as con:
        for table, events in (("observation_labevents", "labevents"), ("observation_chartevents", "chartevents"),
                              ("observation_outputevents", "outputevents")):
            (n_rows,) = con.execute(f"select count(*) from {INT}{events}").fetchone()
            assert len(resources[table]) == n_rows > 1000, table
    assert len(resources["observation_micro_susc"]) == sum(1 for row in profile_micro if row["ab_itemid"]) > 100
    assert len(resources["observation_micro_test"]) == len({(r["micro_specimen_id"], r["test_itemid"])
                                                            for r in profile_micro}) > 100
    assert len(resources["observation_micro_org"]) == len({(r["micro_specimen_id"], r["test_itemid"], r["org_itemid"])
                                                           for r in profile_micro if r["org_itemid"]}) > 50
    assert len(resources["specimen"]) == len({r["micro_specimen_id"] for r in profile_micro}) > 100


def test_every_reference_resolves(resources):
    patients, encounters, specimens = resources["patient"], resources["encounter"], resources["specimen"]
    observations = {i: r for table in OBSERVATION_TABLES for i, r in resources[table].items()}
    for resource in (*observations.values(), *specimens.values()):
        assert _ref(resource["subject"], "Patient") in patients
        if "encounter" in resource:
            encounter = encounters[_ref(resource["encounter"], "Encounter")]
            assert encounter["subject"] == resource["subject"]
        if "specimen" in resource:
            assert specimens[_ref(resource["specimen"], "Specimen")]["subject"] == resource["subject"]
        for reference in (*resource.get("hasMember", ()), *resource.get("derivedFrom", ())):
            assert observations[_ref(reference, "Observation")]["subject"] == resource["subject"]
    # test -> organisms -> susceptibilities, and back through derivedFrom
    members = defaultdict(set)
    for table in ("observation_micro_org", "observation_micro_susc"):
        for member_id, member in resources[table].items():
            (parent,) = member["derivedFrom"]
            members[_ref(parent, "Observation")].add(member_id)
    for table in ("observation_micro_test", "observation_micro_org"):
        for parent_id, parent in resources[table].items():
            assert {_ref(m, "Observation") for m in parent.get("hasMember", ())} == members.get(parent_id, set())
            # a result value only where there are no members (no growth, no susceptibility testing)
            assert ("hasMember" in parent) != ("valueString" in parent or "valueCodeableConcept" in parent)
    tests = resources["observation_micro_test"].values()
    assert any("hasMember" in t for t in tests) and any("hasMember" not in t for t in tests)
    # ICU vital signs and outputs belong to an ICU stay
    for table in ("observation_chartevents", "observation_outputevents"):
        assert all(encounters[_ref(r["encounter"], "Encounter")]["class"]["code"] == "ACUTE"
                   for r in resources[table].values())


def test_original_casing(resources):
    labs = resources["observation_labevents"].values()
    displays = {_coding(r)["display"] for r in labs}
    assert "Phosphate" in displays and "phosphate" not in displays
    assert {"mg/dL", "mEq/L"} <= {r["valueQuantity"].get("unit") for r in labs}
    assert {"°C", "mmHg"} <= {r["valueQuantity"]["unit"] for r in resources["observation_chartevents"].values()}
    organisms = {_coding(r)["display"] for r in resources["observation_micro_org"].values()}
    assert "ESCHERICHIA COLI" in organisms
    assert "Blood Culture, Routine" in {_coding(r)["display"] for r in resources["observation_micro_test"].values()}


def test_effective_times_are_the_profiles_shifted_times(warehouse, resources):
    """The FHIR view shows the SQL profile's times: through the lineage (profile row -> MIMIC-IV key), each
    ehrsql2024 row's charttime is the effectiveDateTime of its Observation."""
    with connect(warehouse, read_only=True) as con:
        def profile_times(table: str) -> list[tuple[str, str]]:
            return con.execute(
                f"select l.source_key::varchar, strftime(p.charttime, '%Y-%m-%dT%H:%M:%S') "
                f"from ehrsql2024__mimic_iv.{table} as p "
                f"join lineage.ehrsql2024__mimic_iv as l on l.table_name = '{table}' and l.row_id = p.row_id"
            ).fetchall()

        checked = 0
        for table, namespace, key in (
                ("labevents", "ObservationLabevents", lambda k: str(k["labevent_id"])),
                ("chartevents", "ObservationChartevents",
                 lambda k: f"{k['stay_id']}-{k['charttime']}-{k['itemid']}-{k['value']}"),
                ("outputevents", "ObservationOutputevents",
                 lambda k: f"{k['stay_id']}-{k['charttime']}-{k['itemid']}")):
            observations = resources[f"observation_{table}"]
            rows = profile_times(table)
            assert len(rows) > 1000
            for source_key, charttime in rows:
                observation = observations[mimic_fhir_id(namespace, key(json.loads(source_key)))]
                assert observation["effectiveDateTime"] == f"{charttime}-04:00"
                checked += 1
        for source_key, charttime in profile_times("microbiologyevents"):
            k = json.loads(source_key)
            test = resources["observation_micro_test"][
                mimic_fhir_id("ObservationMicroTest", f"{k['micro_specimen_id']}-{k['test_itemid']}")]
            specimen = resources["specimen"][mimic_fhir_id("SpecimenMicro", str(k["micro_specimen_id"]))]
            assert test["effectiveDateTime"] == specimen["collection"]["collectedDateTime"] == f"{charttime}-04:00"
            susceptibility = resources["observation_micro_susc"].get(
                mimic_fhir_id("ObservationMicroSusc", str(k["microevent_id"])))
            if susceptibility is not None:
                assert susceptibility["effectiveDateTime"] == f"{charttime}-04:00"
            checked += 1
    assert checked > 60_000
