"""FHIR search: parameter parsing (dates, prefixes, codes, paging, strictness) and the index's answers over a small
hand-made resources.duckdb whose dates sit on and around the bounds that matter."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest

from ehrbench.fhir.search import SearchIndex
from ehrbench.fhir.search_params import (
    MAX_COUNT,
    MAX_INTEGER,
    MAX_PARAMETERS,
    MAX_REPEATS,
    MAX_VALUE_CHARS,
    MAX_VALUES,
    Code,
    DateRange,
    SearchError,
    SearchTimeout,
    parse_date,
    parse_date_param,
    parse_search,
    search_parameters,
)
from tests.bounded import finished_within
from tests.fhir_fakes import slow_down_searches, write_resources_db

LAB = "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-d-labitems"
LOINC = "http://loinc.org"
CHART = "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-d-items"
ICD10 = "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-diagnosis-icd10"
NDC = "http://hl7.org/fhir/sid/ndc"


def _subject(patient: str) -> dict:
    return {"subject": {"reference": f"Patient/{patient}"}}


def _observation(id_: str, patient: str, codings: list[tuple[str, str]], when: str | tuple[str, str]) -> dict:
    effective = ({"effectiveDateTime": when} if isinstance(when, str)
                 else {"effectivePeriod": {"start": when[0], "end": when[1]}})
    return {"resourceType": "Observation", "id": id_, "status": "final", **_subject(patient),
            "code": {"coding": [{"system": s, "code": c} for s, c in codings]}, **effective}


def sample_resources(extra_observations: int = 0) -> list[dict]:
    """Two patients; times in the -04:00 offset the builds write. The Observations sit just before, on and after
    the day 2180-07-23; `extra_observations` more for patient b, all at one time (paging ties break by id)."""
    resources = [
        {"resourceType": "Patient", "id": "pat-a", "gender": "female", "birthDate": "2100-01-01"},
        {"resourceType": "Patient", "id": "pat-b", "gender": "male", "birthDate": "2101-06-15"},
        {"resourceType": "Encounter", "id": "enc-a1", "status": "finished", **_subject("pat-a"),
         "period": {"start": "2180-07-20T08:00:00-04:00", "end": "2180-07-23T12:00:00-04:00"}},
        {"resourceType": "Encounter", "id": "enc-a2", "status": "in-progress", **_subject("pat-a"),
         "period": {"start": "2180-07-25T09:00:00-04:00"}},
        {"resourceType": "Encounter", "id": "enc-b1", "status": "finished", **_subject("pat-b"),
         "period": {"start": "2180-07-23T01:00:00-04:00", "end": "2180-07-23T05:00:00-04:00"}},
        _observation("obs-a1", "pat-a", [(LAB, "50912")], "2180-07-22T23:59:59-04:00"),
        _observation("obs-a2", "pat-a", [(LAB, "50912")], "2180-07-23T00:00:00-04:00"),
        _observation("obs-a3", "pat-a", [(LAB, "50971")], "2180-07-23T23:59:59-04:00"),
        _observation("obs-a4", "pat-a", [(LAB, "50912")], "2180-07-24T00:00:00-04:00"),
        _observation("obs-a5", "pat-a", [(LAB, "50971"), (LOINC, "2823-3")], "2180-08-01T10:00:00-04:00"),
        _observation("obs-b1", "pat-b", [(LAB, "50912")], "2180-07-23T12:00:00-04:00"),
        _observation("obs-b2", "pat-b", [(CHART, "220045")],
                     ("2180-07-22T20:00:00-04:00", "2180-07-23T02:00:00-04:00")),
        _observation("obs-0b", "pat-b", [(LAB, "50912")], "2180-07-23T00:00:00-04:00"),  # ties obs-a2: id decides
        {"resourceType": "Condition", "id": "cond-a1", **_subject("pat-a"),
         "encounter": {"reference": "Encounter/enc-a1"},
         "code": {"coding": [{"system": ICD10, "code": "I10"}]}},
        {"resourceType": "Condition", "id": "cond-b1", **_subject("pat-b"),
         "encounter": {"reference": "Encounter/enc-b1"},
         "code": {"coding": [{"system": ICD10, "code": "E119"}]}},
        {"resourceType": "Medication", "id": "med-1", "code": {"coding": [{"system": NDC, "code": "0001"}]}},
        {"resourceType": "MedicationRequest", "id": "mr-a1", "status": "completed", "intent": "order",
         **_subject("pat-a"), "medicationReference": {"reference": "Medication/med-1"},
         "authoredOn": "2180-07-23T10:00:00-04:00"},
        {"resourceType": "MedicationRequest", "id": "mr-a2", "status": "completed", "intent": "order",
         **_subject("pat-a"), "medicationCodeableConcept": {"coding": [{"system": NDC, "code": "0002"}]},
         "authoredOn": "2180-07-24"},
    ]
    resources += [_observation(f"obs-x{n:04d}", "pat-b", [(CHART, "220045")], "2180-09-01T08:00:00-04:00")
                  for n in range(extra_observations)]
    return resources


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> SearchIndex:
    path = write_resources_db(tmp_path_factory.mktemp("fhir") / "resources.duckdb", sample_resources())
    index = SearchIndex(path)
    yield index
    index.close()


def ids(index: SearchIndex, resource_type: str, *params: tuple[str, str]) -> list[str]:
    return index.search(parse_search(resource_type, list(params))).ids


# --- parsing -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, lo, hi", [
    ("2180", datetime(2180, 1, 1), datetime(2181, 1, 1)),
    ("2180-12", datetime(2180, 12, 1), datetime(2181, 1, 1)),
    ("2180-07-23", datetime(2180, 7, 23), datetime(2180, 7, 24)),
    ("2180-07-23T10:15", datetime(2180, 7, 23, 10, 15), datetime(2180, 7, 23, 10, 16)),
    ("2180-07-23T10:15:30", datetime(2180, 7, 23, 10, 15, 30), datetime(2180, 7, 23, 10, 15, 31)),
    ("2180-07-23T10:15:30-04:00", datetime(2180, 7, 23, 10, 15, 30), datetime(2180, 7, 23, 10, 15, 31)),
    # other offsets are converted to the builds' -04:00 wall clock
    ("2180-07-23T14:15:30Z", datetime(2180, 7, 23, 10, 15, 30), datetime(2180, 7, 23, 10, 15, 31)),
    ("2180-07-23T16:15:30+02:00", datetime(2180, 7, 23, 10, 15, 30), datetime(2180, 7, 23, 10, 15, 31)),
    ("2180-07-23T16:15:30 02:00", datetime(2180, 7, 23, 10, 15, 30), datetime(2180, 7, 23, 10, 15, 31)),  # '+' as ' '
    ("2180-07-23T10:15:30.25-04:00", datetime(2180, 7, 23, 10, 15, 30, 250000),
     datetime(2180, 7, 23, 10, 15, 30, 260000)),
])
def test_a_date_is_the_range_of_its_precision_in_local_wall_clock_time(text, lo, hi):
    assert parse_date(text) == DateRange(lo, hi)


@pytest.mark.parametrize("text", ["2180-13", "2180-02-30", "2180-07-23T25:00", "23-07-2180", "2180-7-3", "",
                                  "2180-07-23T10:00:00+4", "yesterday",
                                  "9999-12-31T23:00:00-14:00", "0001-01-01T00:00:00+14:00",  # past datetime's range
                                  "\u0662\u0661\u0668\u0660"])  # digits of another script
def test_an_invalid_date_is_a_search_error_naming_it(text):
    with pytest.raises(SearchError, match="invalid date"):
        parse_date(text)


def test_date_prefixes_default_to_eq_and_unknown_ones_are_rejected():
    assert parse_date_param("2180-07-23").prefix == "eq"
    assert parse_date_param("ge2180-07-23").prefix == "ge"
    assert parse_date_param("lt2180-07-23T10:00:00Z").range.lo == datetime(2180, 7, 23, 6)
    with pytest.raises(SearchError, match="unsupported date prefix 'sa'.*eq, ne, gt, lt, ge, le"):
        parse_date_param("sa2180-07-23")


def test_codes_with_and_without_systems_or_and_and():
    query = parse_search("Observation", [("code", f"50912,{LOINC}|2823-3,|x\\,y,{LAB}|"), ("code", "50971")])
    assert query.codes == [[Code(None, "50912"), Code(LOINC, "2823-3"), Code("", "x,y"), Code(LAB, None)],
                           [Code(None, "50971")]]
    with pytest.raises(SearchError, match="invalid code"):
        parse_search("Observation", [("code", "|")])


def test_patient_references_paging_and_empty_values():
    query = parse_search("Observation", [("patient", "Patient/p1,p2"), ("subject", "Group/g"), ("code", ""),
                                         ("_count", "5000"), ("_offset", "10"), ("_format", "json")])
    assert query.patients == [["p1", "p2"], [None]]
    assert query.codes == []  # an empty value is ignored (FHIR)
    assert (query.count, query.offset) == (MAX_COUNT, 10)  # more than the maximum is served in pages of it


@pytest.mark.parametrize("params, message", [
    ([("name", "x")], "unknown search parameter 'name' for Observation"),
    ([("code:text", "x")], "unknown search parameter 'code:text'"),
    ([("_count", "ten")], "invalid _count 'ten'"),
    ([("_count", "-1")], "invalid _count '-1'"),
    ([("_offset", "-5")], "invalid _offset"),
    ([("_count", "5"), ("_count", "6")], "_count given more than once"),
    ([("_format", "xml")], "unsupported _format 'xml'"),
    ([("date", "2180,2181")], "ORed dates are not supported"),
])
def test_bad_search_input_is_a_clear_error(params, message):
    with pytest.raises(SearchError, match=message):
        parse_search("Observation", params)


@pytest.mark.parametrize("name, value", [
    ("_offset", "99999999999999999999999"), ("_offset", str(MAX_INTEGER + 1)), ("_count", "-1"), ("_count", "-0"),
    ("_count", "1e3"), ("_count", "0x10"), ("_count", "1_000"), ("_count", " 5"), ("_count", "+5"),
    ("_count", "\u0663"), ("_offset", "9" * 5000), ("_count", "\x00"),
])
def test_numbers_out_of_range_name_the_parameter_value_and_range(name, value):
    with pytest.raises(SearchError) as raised:
        parse_search("Observation", [(name, value)])
    message = str(raised.value)
    assert message.startswith(f"invalid {name} '{value[:20]}")
    assert message.endswith(f"expected an integer from 0 to {MAX_INTEGER}")
    assert len(message) < 200  # a long value is cut, not echoed whole


def test_numbers_at_the_bounds_are_accepted():
    query = parse_search("Observation", [("_offset", str(MAX_INTEGER)), ("_count", str(MAX_INTEGER))])
    assert (query.offset, query.count) == (MAX_INTEGER, MAX_COUNT)


def _codes(n: int) -> str:
    return ",".join(f"c{i}" for i in range(n))


def test_values_of_one_parameter_are_capped_over_commas_and_repeats():
    assert len(parse_search("Observation", [("code", _codes(MAX_VALUES))]).codes[0]) == MAX_VALUES
    with pytest.raises(SearchError, match=re.escape(f"too many code values: {MAX_VALUES + 1}; at most {MAX_VALUES} "
                                                    "per search (comma-separated and repeated together)")):
        parse_search("Observation", [("code", _codes(MAX_VALUES)), ("code", "one-more")])
    with pytest.raises(SearchError, match="too many code values: 20,000; at most"):
        parse_search("Observation", [("code", ",".join("1" * 20_000))])
    with pytest.raises(SearchError, match="too many patient/subject values"):
        parse_search("Observation", [("patient", _codes(300)), ("subject", _codes(300))])
    with pytest.raises(SearchError, match="too many _id values"):
        parse_search("Patient", [("_id", _codes(MAX_VALUES + 1))])


def test_repeats_of_one_parameter_and_parameters_per_search_are_capped():
    dates = [("date", "ge2180")] * MAX_REPEATS
    assert len(parse_search("Observation", dates).dates) == MAX_REPEATS
    with pytest.raises(SearchError, match=re.escape(f"too many date parameters: 8,000; at most {MAX_REPEATS} per "
                                                    "search (each one is ANDed)")):
        parse_search("Observation", [("date", "ge2180")] * 8000)
    with pytest.raises(SearchError, match="too many patient/subject parameters: 11"):
        parse_search("Observation", [("patient", "pat-a")] * 6 + [("subject", "pat-a")] * 5)
    with pytest.raises(SearchError, match=f"too many search parameters: {MAX_PARAMETERS + 1}; at most "
                                          f"{MAX_PARAMETERS} per search"):
        parse_search("Observation", [("_format", "json")] * (MAX_PARAMETERS + 1))


def test_a_value_longer_than_the_cap_is_refused_without_being_echoed():
    with pytest.raises(SearchError) as raised:
        parse_search("Observation", [("patient", "p" * (MAX_VALUE_CHARS + 1))])
    assert str(raised.value) == (f"patient value too long: {MAX_VALUE_CHARS + 1:,} characters; at most "
                                 f"{MAX_VALUE_CHARS:,} per value")
    with pytest.raises(SearchError) as raised:
        parse_search("Observation", [("date", "2" * 50_000)])
    assert "invalid date '222" in str(raised.value) and "(50,000 characters)" in str(raised.value)
    assert len(str(raised.value)) < 300


def test_values_of_only_commas_are_ignored_like_empty_ones():
    query = parse_search("Observation", [("code", ",,,"), ("_id", ","), ("patient", ",")])
    assert (query.codes, query.ids, query.patients) == ([], [], [])


def test_search_parameters_follow_the_types_elements():
    assert search_parameters("Patient") == ["_id", "_count"]
    assert search_parameters("Encounter") == ["patient", "subject", "date", "_id", "_count"]
    assert search_parameters("Medication") == ["code", "_id", "_count"]
    assert search_parameters("Observation") == ["patient", "subject", "code", "date", "_id", "_count"]
    assert search_parameters("DiagnosticReport") == ["patient", "subject", "code", "date", "_id", "_count"]
    with pytest.raises(SearchError, match="unknown search parameter 'date' for Patient"):
        parse_search("Patient", [("date", "2100")])


# --- index and search SQL --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["2180", "2180-12", "2180-07-23", "2180-07-23T10:15:30-04:00", "2180-07-23T14:15:30Z",
                                  "2180-07-23T16:15:30+02:00", "2180-07-23T10:15:30.25-04:00",
                                  "2180-12-31T23:59:59.999999-04:00", "2180-07-23T10:15:30"])
def test_the_index_reads_dates_as_parse_date_does(index, text):
    with index.cursor() as cur:
        lo, hi = cur.execute("select fhir_lo(?), fhir_lo(?) + fhir_precision(?)", [text] * 3).fetchone()
    assert DateRange(lo, hi) == parse_date(text)


def test_the_index_holds_every_resource(index):
    assert index.types == {"Condition": 2, "Encounter": 3, "Medication": 1, "MedicationRequest": 2,
                           "Observation": 8, "Patient": 2}


@pytest.mark.parametrize("date, expected", [
    ("2180-07-23", ["obs-0b", "obs-a2", "obs-b1", "obs-a3"]),  # within the day
    ("eq2180-07-23", ["obs-0b", "obs-a2", "obs-b1", "obs-a3"]),
    ("ne2180-07-23", ["obs-b2", "obs-a1", "obs-a4", "obs-a5"]),
    ("ge2180-07-23", ["obs-0b", "obs-a2", "obs-b1", "obs-a3", "obs-a4", "obs-a5"]),  # inclusive of the day
    ("le2180-07-23", ["obs-b2", "obs-a1", "obs-0b", "obs-a2", "obs-b1", "obs-a3"]),  # b2 starts before the day
    ("gt2180-07-23", ["obs-a4", "obs-a5"]),  # after the whole day
    ("lt2180-07-23", ["obs-b2", "obs-a1"]),
    ("ge2180-07-23T00:00:00", ["obs-b2", "obs-0b", "obs-a2", "obs-b1", "obs-a3", "obs-a4", "obs-a5"]),  # b2 overlaps
    ("gt2180-07-23T00:00:00-04:00", ["obs-b2", "obs-b1", "obs-a3", "obs-a4", "obs-a5"]),
    ("lt2180-07-23T04:00:00Z", ["obs-b2", "obs-a1"]),  # = 00:00 at -04:00
    ("le2180-07-22T23:59:59", ["obs-b2", "obs-a1"]),
    ("2180-07", ["obs-b2", "obs-a1", "obs-0b", "obs-a2", "obs-b1", "obs-a3", "obs-a4"]),
    ("2180", ["obs-b2", "obs-a1", "obs-0b", "obs-a2", "obs-b1", "obs-a3", "obs-a4", "obs-a5"]),
])
def test_date_prefixes_at_day_and_second_precision(index, date, expected):
    assert ids(index, "Observation", ("date", date)) == expected


def test_periods_overlapping_a_bound_and_open_periods(index):
    # enc-a1: 07-20 08:00 .. 07-23 12:00; enc-a2: from 07-25 09:00, no end; enc-b1: 07-23 01:00 .. 05:00
    assert ids(index, "Encounter", ("date", "ge2180-07-23")) == ["enc-b1", "enc-a2"]  # a1 ends on the day: not after
    assert ids(index, "Encounter", ("date", "ge2180-07-22")) == ["enc-a1", "enc-b1", "enc-a2"]
    assert ids(index, "Encounter", ("date", "le2180-07-23")) == ["enc-a1", "enc-b1"]
    assert ids(index, "Encounter", ("date", "le2180-07-25")) == ["enc-a1", "enc-b1"]  # a2 starts on the 25th
    assert ids(index, "Encounter", ("date", "le2180-07-26")) == ["enc-a1", "enc-b1", "enc-a2"]
    assert ids(index, "Encounter", ("date", "gt2999")) == ["enc-a2"]  # still open
    assert ids(index, "Encounter", ("date", "2180-07-23")) == ["enc-b1"]
    # a date range as two ANDed parameters: what overlaps 07-21 .. 07-23
    assert ids(index, "Encounter", ("date", "ge2180-07-21"), ("date", "le2180-07-23")) == ["enc-a1", "enc-b1"]


def test_conditions_take_their_encounters_period(index):
    assert ids(index, "Condition", ("date", "lt2180-07-21")) == ["cond-a1"]
    assert ids(index, "Condition", ("date", "2180-07-23")) == ["cond-b1"]
    assert ids(index, "Condition", ("date", "2180-07")) == ["cond-a1", "cond-b1"]


def test_codes_any_system_exact_system_or_and_and(index):
    assert ids(index, "Observation", ("code", "50912")) == ["obs-a1", "obs-0b", "obs-a2", "obs-b1", "obs-a4"]
    assert ids(index, "Observation", ("code", f"{LAB}|50971,{CHART}|220045")) == ["obs-b2", "obs-a3", "obs-a5"]
    assert ids(index, "Observation", ("code", f"{LOINC}|50971")) == []  # right code, wrong system
    assert ids(index, "Observation", ("code", f"{LOINC}|")) == ["obs-a5"]
    assert ids(index, "Observation", ("code", "|50912")) == []  # no system: none here
    assert ids(index, "Observation", ("code", "50971"), ("code", "2823-3")) == ["obs-a5"]  # both on one resource


def test_medication_codes_include_the_referenced_medications(index):
    assert ids(index, "MedicationRequest", ("code", "0001")) == ["mr-a1"]
    assert ids(index, "MedicationRequest", ("code", f"{NDC}|0002")) == ["mr-a2"]
    assert ids(index, "MedicationRequest", ("date", "2180-07-24")) == ["mr-a2"]  # authoredOn, a date


def test_patient_and_subject_filters(index):
    expected_b = ["obs-b2", "obs-0b", "obs-b1"]
    assert ids(index, "Observation", ("patient", "pat-b")) == expected_b
    assert ids(index, "Observation", ("subject", "Patient/pat-b")) == expected_b
    assert ids(index, "Observation", ("patient", "pat-b"), ("code", "50912"), ("date", "ge2180-07-23T06:00")) == [
        "obs-b1"]
    assert len(ids(index, "Observation", ("patient", "pat-a,pat-b"))) == 8
    assert ids(index, "Observation", ("patient", "pat-a"), ("patient", "pat-b")) == []
    assert ids(index, "Observation", ("subject", "Group/pat-b")) == []
    assert ids(index, "Patient", ("_id", "pat-b,nobody")) == ["pat-b"]


def test_paging_is_ordered_by_date_then_id_with_the_full_total(index):
    everything = ids(index, "Observation")
    assert everything == ["obs-b2", "obs-a1", "obs-0b", "obs-a2", "obs-b1", "obs-a3", "obs-a4", "obs-a5"]
    pages = [index.search(parse_search("Observation", [("_count", "3"), ("_offset", str(offset))]))
             for offset in (0, 3, 6, 9)]
    assert [p.total for p in pages] == [8] * 4
    assert [i for p in pages for i in p.ids] == everything
    assert pages[3].ids == []
    assert index.search(parse_search("Observation", [("_count", "0")])).ids == []
    assert ids(index, "Patient") == ["pat-a", "pat-b"]  # undated: by id


def test_read_and_fetch_return_the_stored_json(index):
    assert json.loads(index.read("Observation", "obs-a5"))["code"]["coding"][1]["code"] == "2823-3"
    assert index.read("Observation", "pat-a") is None  # ids are per type
    assert [json.loads(t)["id"] for t in index.resources("Patient", ["pat-b", "pat-a"])] == ["pat-b", "pat-a"]


def test_values_of_only_commas_search_everything(index):
    assert ids(index, "Observation", ("code", ",,,,"), ("_id", ",")) == ids(index, "Observation")


def test_a_search_past_the_timeout_is_stopped_and_the_index_still_answers(tmp_path):
    index = SearchIndex(write_resources_db(tmp_path / "resources.duckdb", sample_resources()), timeout_s=0.5)
    slow_down_searches(index)
    try:
        outcome, elapsed = finished_within(20, index.search, parse_search("Observation", [("patient", "pat-a")]))
        assert isinstance(outcome, SearchTimeout) and isinstance(outcome, SearchError)
        assert str(outcome).startswith("the search exceeded 0.5 s and was stopped; narrow the search")
        assert 0.4 < elapsed < 5
        assert json.loads(index.read("Patient", "pat-a"))["id"] == "pat-a"  # other statements run as before
    finally:
        index.close()
