"""Structural validation of FHIR resources (fhir.resources R4B)."""

from __future__ import annotations

import json

from ehrbench.fhir.validation import PARALLEL_FROM, validate_resources

PATIENT = {"resourceType": "Patient", "id": "51d2190c-cc46-56c5-b2ea-363895cbea75", "gender": "female",
           "birthDate": "2048-08-04", "deceasedDateTime": "2100-09-29T00:00:00-04:00"}
ENCOUNTER = {"resourceType": "Encounter", "id": "e1", "status": "finished",
             "class": {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "IMP"},
             "subject": {"reference": "Patient/51d2190c-cc46-56c5-b2ea-363895cbea75"},
             "period": {"start": "2100-07-01T12:46:30-04:00"}}


def test_valid_resources_pass():
    report = validate_resources([json.dumps(PATIENT), json.dumps(ENCOUNTER)])
    assert report.ok and report.checked == 2


def test_invalid_resources_are_reported_by_type_and_id():
    bad = [
        {**PATIENT, "gender": "F"},  # not in the administrative-gender value set
        {**PATIENT, "birthDate": "04/08/2048"},  # not a FHIR date
        {key: value for key, value in ENCOUNTER.items() if key != "status"},  # status is required
        {**ENCOUNTER, "period": {"start": "2100-07-01T12:46:30"}},  # a time needs a zone offset in FHIR
        {"resourceType": "Patientt", "id": "x"},
    ]
    report = validate_resources([json.dumps(resource) for resource in bad] + ["{not json"])
    assert report.checked == 6 and len(report.failures) == 6
    assert [label for label, _ in report.failures][:3] == [f"Patient/{PATIENT['id']}"] * 2 + ["Encounter/e1"]


def test_failures_kept_are_capped_but_all_are_checked():
    report = validate_resources([json.dumps({**PATIENT, "gender": "F"})] * 30, max_failures=5)
    assert report.checked == 30 and len(report.failures) == 5 and not report.ok


def test_empty_elements_and_codes_outside_required_bindings_fail():
    bad = [
        {**ENCOUNTER, "hospitalization": {}},  # every member was null: the object must go too
        {**ENCOUNTER, "location": []},
        {**PATIENT, "name": [{"family": ""}]},
        {"resourceType": "Observation", "id": "o1", "status": "done", "code": {"text": "sodium"}},
        {"resourceType": "MedicationRequest", "id": "m1", "status": "completed", "intent": "prescription",
         "subject": {"reference": "Patient/p"}, "medicationReference": {"reference": "Medication/x"}},
    ]
    report = validate_resources([json.dumps(resource) for resource in bad])
    messages = [message for _, message in report.failures]
    assert len(messages) == 5
    assert "Encounter.hospitalization is empty" in messages[0] and "Encounter.location is empty" in messages[1]
    assert "family" in messages[2]  # fhir.resources itself rejects empty strings
    assert "Observation.status 'done'" in messages[3] and "MedicationRequest.intent 'prescription'" in messages[4]


def test_worker_processes_report_what_one_process_reports_in_input_order():
    """A large set is dealt to worker processes; the report is the same as in-process, failures in input order and
    capped the same way, whichever worker found them."""
    texts = []
    for i in range(41):
        resource = {**PATIENT, "id": f"p{i}"}
        if i % 7 == 3:
            resource["gender"] = "F"
        texts.append(json.dumps(resource))
    texts[20] = "{not json\nspanning lines\t"  # a text of any content travels to its worker intact
    serial = validate_resources(texts, max_failures=4)
    parallel = validate_resources(texts, max_failures=4, workers=2, expected=PARALLEL_FROM)
    assert parallel.checked == serial.checked == 41
    assert parallel.failures == serial.failures
    assert [label for label, _ in parallel.failures] == ["Patient/p3", "Patient/p10", "Patient/p17",
                                                         "{not json\nspanning lines\t"]
