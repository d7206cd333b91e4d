"""The free-text answer match (ehrbench.metrics.answers) on hand-checked cases, one table per rule of its docstring,
each rule with the answers it must reject next to those it accepts."""

from __future__ import annotations

import datetime as dt

import pytest

from ehrbench.metrics.answers import answer_matches, answer_values, normalise_value

ADMIT = "[['2100-12-20 01:43:00']]"
VALUE = "[['6.51']]"
YES, NO = "[['1']]", "[['0']]"
DRUGS = "[['aspirin'], ['heparin']]"
EMPTY = "[]"


@pytest.mark.parametrize(("value", "expected"), [
    ("6.510", "6.51"),
    (6.51, "6.51"),
    ("1.0", "1"),
    (100, "100"),
    ("-67.0", "-67"),
    ("40,955.0", "40955"),
    (2.7274, "2.727"),  # rounded to 3 decimals like the EHRSQL-2024 scorer
    (-0.0001, "0"),
    (True, "1"),
    ("Yes", "1"),
    ("FALSE", "0"),
    ("no", "0"),
    (None, "none"),
    ("NULL", "none"),
    ("Female", "f"),
    ("male", "m"),
    ("  EW   Emer. ", "ew emer"),
    ('"Aspirin"', "aspirin"),
    ("2100-12-20T01:43:00-04:00", "2100-12-20 01:43:00"),
    ("2100-12-20T05:43:00Z", "2100-12-20 01:43:00"),  # UTC 05:43 is 01:43 at -04:00
    ("2100-12-20T03:43:00-02:00", "2100-12-20 01:43:00"),
    ("2100-12-20 01:43", "2100-12-20 01:43:00"),
    ("2100-12-20T01:43:00.000-04:00", "2100-12-20 01:43:00"),
    ("2100-12-21T02:00:00Z", "2100-12-20 22:00:00"),  # the offset moves the date back
    ("2052-08-08 00:00:00", "2052-08-08"),  # midnight is written as its date
    (dt.datetime(2100, 12, 20, 1, 43), "2100-12-20 01:43:00"),
    (dt.date(2100, 3, 19), "2100-03-19"),
    ("2100-02-30", "2100-02-30"),  # not a date: plain text
    ("2100-12", "2100-12"),
])
def test_normalise_value(value, expected):
    assert normalise_value(value) == expected


def test_answer_values_flattens_and_normalises_the_gold_cells():
    assert answer_values("[['2100-03-19', '50.0'], ['2100-03-20', '50.0']]") == [
        "2100-03-19", "50", "2100-03-20", "50"]
    assert answer_values("[['EW EMER.'], ['True'], ['None']]") == ["ew emer", "1", "none"]
    assert answer_values(EMPTY) == []


def test_answer_values_rejects_a_string_that_is_not_a_list_of_rows():
    with pytest.raises(ValueError):
        answer_values("['6.51']")


CASES = [
    # numbers: rounded to 3 decimals, units in a one-number answer ignored
    ("6.510", VALUE, True),
    ("6.51 mg/dL", VALUE, True),
    (6.51, VALUE, True),
    ("6.5", VALUE, False),
    ("6.52", VALUE, False),
    ("6.5104", VALUE, True),  # rounds to 6.51
    ("6.5106", VALUE, False),  # rounds to 6.511
    ("1", "[['1.0']]", True),
    ("40,955 mL", "[['40955.0']]", True),
    ("-67", "[['-67.0']]", True),
    ("67", "[['-67.0']]", False),
    # datetimes: wall clock at -04:00, to the minute when the gold's seconds are 00
    ("2100-12-20 01:43:00", ADMIT, True),
    ("2100-12-20T01:43:00-04:00", ADMIT, True),
    (["2100-12-20T01:43:00-04:00"], ADMIT, True),
    ("2100-12-20T05:43:00Z", ADMIT, True),
    ("2100-12-20T05:43:00+00:00", ADMIT, True),
    ("2100-12-20T01:43:00Z", ADMIT, False),  # 01:43 UTC is 21:43 the day before
    ("2100-12-20 01:43", ADMIT, True),
    ("2100-12-20 01:44", ADMIT, False),  # wrong minute
    ("2100-12-20 01:43:30", ADMIT, False),  # a second the gold does not have
    ("2100-12-20", ADMIT, False),  # date only for a time
    ("2100-12-20 01:43", "[['2100-12-20 01:43:27']]", False),  # the gold has seconds
    ("2100-12-20T01:43:27-04:00", "[['2100-12-20 01:43:27']]", True),
    ("2052-08-08", "[['2052-08-08 00:00:00']]", True),  # FHIR birthDate vs SQL dob
    ("2100-03-19", "[['2100-03-19']]", True),
    ("2100-03-18", "[['2100-03-19']]", False),
    # booleans
    ("yes", YES, True),
    ("Yes.", YES, True),
    ("true", YES, True),
    (True, YES, True),
    ("1", YES, True),
    ("no", NO, True),
    ("False", NO, True),
    ("0", NO, True),
    ("yes", NO, False),
    ("no", YES, False),
    ("yes", "[['True']]", True),
    ("no", "[['False']]", True),
    # text: case and whitespace, gender written out
    ("EW  EMER.", "[['ew emer.']]", True),
    ("Skilled Nursing Facility", "[['skilled nursing facility']]", True),
    ("skilled nursing", "[['skilled nursing facility']]", False),
    ("female", "[['f']]", True),
    ("male", "[['f']]", False),
    ("none", "[['None']]", True),  # a NULL value
    ("home", "[['None']]", False),
    # several values: the same set, order and duplicates ignored
    ("aspirin, heparin", DRUGS, True),
    ("Heparin and aspirin", DRUGS, True),
    ("aspirin\nheparin\naspirin", DRUGS, True),
    ("- aspirin\n- heparin", DRUGS, True),
    (["heparin", "aspirin"], DRUGS, True),
    ([["aspirin"], ["heparin"]], DRUGS, True),
    ("['aspirin', 'heparin']", DRUGS, True),
    ('["aspirin", "heparin"]', DRUGS, True),
    ("The drugs were: aspirin, heparin", DRUGS, True),
    ("aspirin", DRUGS, False),  # missing value
    (["aspirin"], DRUGS, False),
    ("aspirin, heparin, warfarin", DRUGS, False),  # extra value
    (["aspirin", "heparin", "warfarin"], DRUGS, False),
    ("aspirin or heparin", DRUGS, False),
    ("The patient got aspirin and heparin.", DRUGS, False),  # prose with several values: left to the judge
    ("obesity, unspecified, bacteremia", "[['obesity, unspecified'], ['bacteremia']]", True),  # commas in a value
    ("obesity, bacteremia", "[['obesity, unspecified'], ['bacteremia']]", False),
    ("sodium chloride 0.9%", "[['sodium chloride 0.9%'], ['sodium chloride 0.9%  flush']]", False),
    ("sodium chloride 0.9% flush, sodium chloride 0.9%", "[['sodium chloride 0.9%'], ['sodium chloride 0.9%  flush']]",
     True),
    (["2100-10-12T14:00:00-04:00", "2100-11-19T14:00:00-04:00"], "[['2100-10-12 14:00:00'], ['2100-11-19 14:00:00']]",
     True),
    (["2100-10-12T14:00:00-04:00"], "[['2100-10-12 14:00:00'], ['2100-11-19 14:00:00']]", False),
    # several columns: one row is a set of values, several rows must be given as rows
    ("2100-12, 145.0", "[['2100-12', '145.0']]", True),
    (["2100", 126.348], "[['2100', '126.348']]", True),
    ([["2100-03-19", 50], ["2100-03-20", 60]], "[['2100-03-19', '50.0'], ['2100-03-20', '60.0']]", True),
    ("[['2100-03-20', '60'], ['2100-03-19', '50']]", "[['2100-03-19', '50.0'], ['2100-03-20', '60.0']]", True),
    ([["2100-03-19", 60], ["2100-03-20", 50]], "[['2100-03-19', '50.0'], ['2100-03-20', '60.0']]", False),  # swapped
    (["2100-03-19", 50, "2100-03-20", 60], "[['2100-03-19', '50.0'], ['2100-03-20', '60.0']]", False),  # not rows
    # empty gold: only an explicit empty answer
    ([], EMPTY, True),
    ("", EMPTY, True),
    ("[]", EMPTY, True),
    ("None", EMPTY, True),
    ("No results.", EMPTY, True),
    ("0", EMPTY, False),
    ("aspirin", EMPTY, False),
    (["aspirin"], EMPTY, False),
    ([], DRUGS, False),  # empty vs non-empty
    ("none", DRUGS, False),
    ("no results", YES, False),
    ("", VALUE, False),
    # None never matches
    (None, VALUE, False),
    (None, EMPTY, False),
    (None, "[['None']]", False),
    # prose with one gold value: exactly that value among the values of its kind
    ("The value was 6.51 mg/dL.", VALUE, True),
    ("The value was 6.5 mg/dL.", VALUE, False),
    ("It was between 6.51 and 7.2.", VALUE, False),
    ("The latest creatinine of patient 10005817 was 6.51 mg/dL.", VALUE, True),  # the id echo is not a value
    ("On 2100-12-20 at 01:43 the value was 6.51.", VALUE, True),  # a date and a time are not values
    ("At 01:43 the value was 6.51.", VALUE, True),  # nor is a time alone
    ("The o2 saturation was 6.51%.", VALUE, True),
    ("The value was not 6.51.", VALUE, False),
    ("The last admission was on 2100-12-20 at 01:43.", ADMIT, True),
    ("The last admission was at 2100-12-20T01:43:00-04:00 (patient 10005817).", ADMIT, True),
    ("Admissions: 2100-12-20T01:43:00-04:00 and 2100-12-22T08:00:00-04:00.", ADMIT, False),
    ("The last admission was on 2100-12-20 at 01:44.", ADMIT, False),
    ("The last admission was on 2100-12-20.", ADMIT, False),
    ("The last admission was on 2100-12-20 at 01:43 PM.", ADMIT, False),  # a 12-hour time is not read
    ("Yes, patient 10014078 was hospitalized within the last 2 years.", YES, True),
    ("No, the patient was not admitted in 02/2100.", NO, True),
    ("No, the patient was not admitted in 02/2100.", YES, False),
    ("Yes and no.", YES, False),
    ("The patient had 1 hospital admission.", YES, True),
    ("Patient 10019917 had 1 hospital admission, not 2.", YES, False),
    ("The patient is female.", "[['f']]", True),
    ("The patient is male.", "[['f']]", False),
    ("The patient was discharged home.", "[['home']]", True),
    ("Discharge location: HOME", "[['home']]", True),
    ("The patient was discharged to home health care.", "[['home']]", False),
    ("The patient was not discharged home.", "[['home']]", False),
    ("The discharge location was not recorded.", "[['None']]", False),
]


@pytest.mark.parametrize(("predicted", "gold", "expected"), CASES)
def test_answer_matches(predicted, gold, expected):
    assert answer_matches(predicted, gold) is expected
