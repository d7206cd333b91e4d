"""The dual grounding check's evaluator: answer shapes read from gold SQL, answers computed from resources."""

from __future__ import annotations

import pytest
from sqlglot import exp

from ehrbench.fhir.grounding_check import AnswerShape, answer_shape, fhir_answer

LABS = [{"resourceType": "Observation", "valueQuantity": {"value": v, "unit": "mEq/L"},
         "effectiveDateTime": f"2100-01-0{i}T08:00:00-04:00"} for i, v in enumerate([140, 135.5, 141], start=1)]
WHERE = " FROM labevents WHERE labevents.hadm_id = 1"


@pytest.mark.parametrize(("sql", "shape"), [
    ("SELECT COUNT(*)" + WHERE, AnswerShape("count")),
    ("SELECT COUNT(*)>0" + WHERE, AnswerShape("exists")),
    ("SELECT MAX(labevents.valuenum)" + WHERE, AnswerShape("aggregate", "labevents", "valuenum", exp.Max)),
    ("SELECT labevents.charttime" + WHERE + " ORDER BY labevents.charttime LIMIT 1",
     AnswerShape("values", "labevents", "charttime")),
    ("SELECT labevents.valueuom" + WHERE, None),  # no element mapped for this column
    ("SELECT (SELECT 1) - (SELECT 2)", None),
    ("SELECT COUNT(*), MAX(labevents.valuenum)" + WHERE, None),
    ("SELECT MAX(labevents.valuenum)" + WHERE + " GROUP BY strftime('%Y-%m-%d', labevents.charttime)", None),
])
def test_answer_shapes(sql, shape):
    assert answer_shape(sql) == shape


def test_answers_from_resources_are_formatted_like_sql_answers():
    assert fhir_answer(AnswerShape("count"), LABS) == "[['3']]"
    assert fhir_answer(AnswerShape("exists"), []) == "[['0']]"
    assert fhir_answer(AnswerShape("aggregate", "labevents", "valuenum", exp.Avg), LABS) == "[['138.833']]"
    assert fhir_answer(AnswerShape("aggregate", "labevents", "valuenum", exp.Min), LABS) == "[['135.5']]"
    # integers in JSON are REAL in SQL: 140 -> '140.0'; dateTimes lose their offset
    assert fhir_answer(AnswerShape("values", "labevents", "valuenum"), LABS[:1]) == "[['140.0']]"
    assert fhir_answer(AnswerShape("values", "labevents", "charttime"), LABS[1:2]) == "[['2100-01-02 08:00:00']]"
    patient = {"resourceType": "Patient", "gender": "female"}
    assert fhir_answer(AnswerShape("values", "patients", "gender"), [patient]) == "[['f']]"


def test_dictionary_titles_are_the_code_displays_of_the_resources():
    sql = ("SELECT d_icd_diagnoses.long_title FROM d_icd_diagnoses WHERE d_icd_diagnoses.icd_code IN "
           "(SELECT diagnoses_icd.icd_code FROM diagnoses_icd WHERE diagnoses_icd.hadm_id = 1)")
    shape = answer_shape(sql)
    assert shape == AnswerShape("values", "d_icd_diagnoses", "long_title")
    conditions = [{"resourceType": "Condition",
                   "code": {"coding": [{"code": "E780", "display": "Pure hypercholesterolemia"}]}}] * 2
    procedure = {"resourceType": "Procedure", "code": {"coding": [{"code": "3961", "display": "Bypass"}]}}
    # the procedure is in the id set too (say, "diagnosed within 2 days after a bypass") but holds no diagnosis title
    assert fhir_answer(shape, [*conditions, procedure]) == "[['pure hypercholesterolemia']]"  # SQL's lower case
    inputs = [{"resourceType": "MedicationAdministration",
               "medicationCodeableConcept": {"coding": [{"code": "220949", "display": "Dextrose 5%"}]}}]
    assert fhir_answer(AnswerShape("values", "d_items", "label"), inputs) == "[['dextrose 5%']]"
