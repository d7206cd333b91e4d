"""FHIR-AgentBench's ground-truth rules (glee4810/FHIR-AgentBench create_question_answer_dataset.py,
create_question_fhir_dataset.py, utils/fhir_utils.py, utils/sql_to_fhir_utils.py, config.py), one case per rule. The
expected values are written from the published rules: ids are uuid5 of the literal key strings its
create_unique_table_id / build_med_id make, computed here with uuid directly."""

from __future__ import annotations

import json
import sqlite3
import uuid

import pytest

from ehrbench.errors import ConfigError
from ehrbench.fhir.agentbench_agreement import agreement, same_answer
from ehrbench.fhir.agentbench_gold import (
    AgentBenchGold,
    SplitQuestion,
    dropped_reason,
    fix_query,
    ground_split,
    read_split,
    row_resource_ids,
    rows_query,
)

MIMIC = uuid.uuid5(uuid.NAMESPACE_OID, "MIMIC-IV")


def uid(namespace: str, key: str) -> str:
    return str(uuid.uuid5(uuid.uuid5(MIMIC, namespace), key))


def question(query: str, question_text: str = "q", template: str = "t", patient: int | None = 1,
             time_filter: dict | None = None, qid: str = "q1") -> SplitQuestion:
    val = {"val_placeholder": {"patient_id": patient} if patient is not None else {},
           "time_placeholder": {"time_filter_global1": time_filter} if time_filter else {}}
    return SplitQuestion(qid, "valid", question_text, query, template, val)


# --- which questions are kept (its load_and_prepare_questions, patient merge, mappable main tables) ---

@pytest.mark.parametrize(("query", "text", "template", "patient", "reason"), [
    ("SELECT cost.cost FROM cost WHERE cost.hadm_id = 1", "q", "t", 1, "reads cost"),
    ("SELECT admissions.insurance FROM admissions", "What is the Insurance name?", "t", 1, "asks about insurance"),
    ("SELECT diagnoses_icd.charttime FROM diagnoses_icd", "q", "t", 1, "reads diagnoses_icd.charttime"),
    ("SELECT d_icd_procedures.long_title FROM d_icd_procedures WHERE x", "q", "t", 1, "main table d_icd_procedures"),
    ("SELECT COUNT(*) FROM inputevents", "q",
     "Has_verb patient {patient_id} had any {input_name} intake [time_filter_global1]?", 1, "removed template"),
    ("SELECT COUNT(*) FROM labevents", "q", "t", None, "no patient"),
    ("SELECT COUNT(*) FROM labevents", "q", "t", 99, "patient not in the data"),
    ("SELECT COUNT(*) FROM ( SELECT labevents.itemid FROM labevents ) AS t1", "q", "t", 1,
     "main table is a derived table"),
    ("SELECT d_items.label FROM d_items", "q", "t", 1, "main table d_items not mapped"),
    ("SELECT COUNT(*) FROM labevents WHERE x", "q", "t", 1, None),
])
def test_questions_are_kept_by_the_published_filters_in_their_order(query, text, template, patient, reason):
    assert dropped_reason(question(query, text, template, patient), {1: 2150}) == reason


def test_the_cost_filter_comes_first_as_published():
    # both cost and a d_icd main table: the published order reports (and counts) cost
    sql = "SELECT d_icd_procedures.long_title FROM d_icd_procedures WHERE d_icd_procedures.icd_code IN (cost)"
    assert dropped_reason(question(sql), {1: 2150}) == "reads cost"


# --- time: 2100 and current_time in the patient's raw calendar (apply_anchor_replacements) ---

def test_2100_becomes_the_anchor_year_only_as_a_whole_number():
    q = question("SELECT 1 FROM labevents WHERE strftime('%Y',labevents.charttime) = '2100' AND "
                 "labevents.labevent_id = 121000 AND x = '05/2100'", "in 2100 or 12100")
    text, sql = fix_query(q, 2133)
    assert text == "in 2133 or 12100"
    assert sql == ("SELECT 1 FROM labevents WHERE strftime('%Y',labevents.charttime) = '2133' AND "
                   "labevents.labevent_id = 121000 AND x = '05/2133'")


def test_current_time_is_midnight_of_the_anchor_years_last_day_in_the_sql():
    q = question("SELECT 1 FROM labevents WHERE datetime(labevents.charttime) >= datetime(current_time,'-1 year')")
    assert fix_query(q, 2133)[1] == ("SELECT 1 FROM labevents WHERE datetime(labevents.charttime) >= "
                                     "datetime('2133-12-31 00:00:00','-1 year')")


def test_a_since_filter_is_capped_at_the_end_of_the_anchor_year():
    part = "AND datetime(labevents.charttime) >= datetime(current_time,'-14 month')"
    q = question(f"SELECT 1 FROM labevents WHERE labevents.itemid = 5 {part} ORDER BY 1",
                 time_filter={"type": "rel-month-since", "sql": part, "col": ["labevents.charttime"]})
    assert fix_query(q, 2133)[1] == (
        "SELECT 1 FROM labevents WHERE labevents.itemid = 5 AND datetime(labevents.charttime) >= "
        "datetime('2133-12-31 00:00:00','-14 month') AND strftime('%Y-%m-%d',labevents.charttime) <= "
        "'2133-12-31 23:59:00' ORDER BY 1")


def test_a_filter_that_is_not_since_is_not_capped():
    part = "AND strftime('%Y',labevents.charttime) = '2100'"
    q = question(f"SELECT 1 FROM labevents WHERE 1 {part}",
                 time_filter={"type": "abs-year-in", "sql": part, "col": ["labevents.charttime"]})
    assert fix_query(q, 2140)[1] == "SELECT 1 FROM labevents WHERE 1 AND strftime('%Y',labevents.charttime) = '2140'"


# --- the rows that are gold (replace_sql_query) ---

def test_the_outer_select_returns_every_row_of_the_main_table():
    sql = ("SELECT COUNT(*)>0 FROM procedures_icd WHERE procedures_icd.hadm_id IN ( SELECT admissions.hadm_id "
           "FROM admissions WHERE admissions.subject_id = 1 ) ORDER BY procedures_icd.charttime DESC LIMIT 1")
    assert rows_query(sql) == ("SELECT procedures_icd.* FROM procedures_icd WHERE procedures_icd.hadm_id IN ( "
                               "SELECT admissions.hadm_id FROM admissions WHERE admissions.subject_id = 1 ) "
                               "ORDER BY procedures_icd.charttime DESC LIMIT 1")


def test_a_difference_of_scalar_subqueries_is_the_union_of_their_rows():
    sql = ("SELECT ( SELECT chartevents.valuenum FROM chartevents WHERE chartevents.stay_id = 1 LIMIT 1 ) - "
           "( SELECT chartevents.valuenum FROM chartevents WHERE chartevents.stay_id = 2 LIMIT 1 )")
    query = rows_query(sql)
    parts = query.split("\nUNION ALL\n")
    assert len(parts) == 2
    assert parts[0].startswith("SELECT * FROM (SELECT chartevents.* FROM chartevents WHERE")
    assert parts[0].endswith(") AS sub1") and parts[1].endswith(") AS sub2")
    rows = _database().execute(query).fetchall()
    assert sorted(r["stay_id"] for r in rows) == [1, 2]


# --- the ids each row makes (create_unique_table_id, assign_medmix_ids, TABLE_TO_RESOURCE_MAP) ---

def test_a_prescription_is_a_request_its_drugs_and_the_mix_of_its_drugs():
    rows = [
        {"pharmacy_id": 7, "raw_drug": "Sodium Chloride 0.9%", "raw_drug_type": "BASE", "raw_formulary_drug_cd": "NS",
         "ndc": "338004903"},
        {"pharmacy_id": 7, "raw_drug": "Potassium Chloride", "raw_drug_type": "ADDITIVE",
         "raw_formulary_drug_cd": "KCL", "ndc": "0"},
        {"pharmacy_id": 7, "raw_drug": "Heparin", "raw_drug_type": "MAIN", "raw_formulary_drug_cd": None,
         "ndc": None},
    ]
    ids = row_resource_ids("prescriptions", rows)
    # MAIN, then BASE, then ADDITIVE; NDC zero-filled to 11 digits; "0" and no formulary code left out
    mix = "Heparin_Sodium Chloride 0.9%--NS--00338004903_Potassium Chloride--KCL"
    assert ids == [("Medication", uid("MedicationPrescriptions", "Sodium Chloride 0.9%--NS--00338004903")),
                   ("Medication", uid("MedicationPrescriptions", "Potassium Chloride--KCL")),
                   ("Medication", uid("MedicationPrescriptions", "Heparin")),
                   ("MedicationRequest", uid("MedicationRequest", "7")),
                   ("Medication", uid("MedicationPrescriptions", mix))]


def test_a_single_drug_order_is_its_own_mix():
    rows = [{"pharmacy_id": 8, "raw_drug": "Tramadol", "raw_drug_type": "MAIN", "raw_formulary_drug_cd": "TRAM50",
             "ndc": "57664037708"}]
    assert row_resource_ids("prescriptions", rows) == [
        ("Medication", uid("MedicationPrescriptions", "Tramadol--TRAM50--57664037708")),
        ("MedicationRequest", uid("MedicationRequest", "8"))]


def test_the_mix_groups_only_the_returned_rows_of_an_order():
    heparin = {"pharmacy_id": 9, "raw_drug": "Heparin", "raw_drug_type": "MAIN", "raw_formulary_drug_cd": None,
               "ndc": None}
    assert uid("MedicationPrescriptions", "Heparin") in {i for _, i in row_resource_ids("prescriptions", [heparin])}


def test_microbiology_rows_make_test_organism_susceptibility_and_specimen_ids():
    row = {"micro_specimen_id": 5, "test_itemid": 90201, "org_itemid": None, "microevent_id": 33}
    assert row_resource_ids("microbiologyevents", [row]) == [
        ("Observation", uid("ObservationMicroTest", "5-90201")),
        ("Observation", uid("ObservationMicroOrg", "90201-5-NULL")),
        ("Observation", uid("ObservationMicroSusc", "33")),
        ("Specimen", uid("Specimen", "5"))]


@pytest.mark.parametrize(("table", "row", "expected"), [
    ("transfers", {"raw_careunit": "Medical Intensive Care Unit (MICU)", "hadm_id": 1},
     ("Location", uid("Location", "Medical Intensive Care Unit (MICU)"))),
    ("diagnoses_icd", {"hadm_id": 20, "seq_num": 3, "raw_icd_code": "v707"},
     ("Condition", uid("Condition", "20-3-V707"))),
    ("chartevents", {"stay_id": 3, "charttime": "2150-01-01 10:00:00", "itemid": 220045, "raw_value": "88"},
     ("Observation", uid("ObservationChartevents", "3-2150-01-01 10:00:00-220045-88"))),
    ("outputevents", {"stay_id": 3, "charttime": "2150-01-01 10:00:00", "itemid": 226559},
     ("Observation", uid("ObservationOutputevents", "3-2150-01-01 10:00:00-226559"))),
    ("icustays", {"stay_id": 31}, ("Encounter", uid("EncounterICU", "31"))),
    ("admissions", {"hadm_id": 21}, ("Encounter", uid("Encounter", "21"))),
    ("labevents", {"labevent_id": 4}, ("Observation", uid("ObservationLabevents", "4"))),
])
def test_each_main_table_makes_its_published_resource(table, row, expected):
    assert row_resource_ids(table, [row]) == [expected]


# --- the whole rule on a small raw database (validate_fhir_ids, filter_invalid_fhir_ids, combine_sql_fhir_df) ---

def _database(path=None) -> sqlite3.Connection:
    con = sqlite3.connect(path or ":memory:")
    con.row_factory = sqlite3.Row
    con.executescript("""
        create table patients (row_id, subject_id, anchor_year);
        insert into patients values (0, 1, 2150);
        create table admissions (row_id, subject_id, hadm_id, admittime);
        insert into admissions values (0, 1, 21, '2150-03-01 10:00:00');
        create table labevents (row_id, subject_id, hadm_id, labevent_id, itemid, charttime, valuenum);
        insert into labevents values (0, 1, 21, 100, 5, '2150-03-01 11:00:00', 1.5),
                                     (1, 1, 21, 101, 5, '2150-03-02 11:00:00', 2.5);
        create table chartevents (row_id, stay_id, charttime, itemid, valuenum, raw_value);
        insert into chartevents values (0, 1, '2150-01-01 10:00:00', 7, 80, '80'),
                                       (1, 2, '2150-01-01 11:00:00', 7, 70, '70');
        create table microbiologyevents (row_id, subject_id, hadm_id, micro_specimen_id, test_itemid, org_itemid,
                                         microevent_id, charttime);
        insert into microbiologyevents values (0, 1, 21, 5, 900, null, 33, '2150-03-01 12:00:00');
    """)
    return con


def _questions():
    labs = ("SELECT COUNT(*) FROM labevents WHERE labevents.hadm_id IN ( SELECT admissions.hadm_id FROM admissions "
            "WHERE admissions.subject_id = 1 ) AND strftime('%Y',labevents.charttime) = '2100'")
    return [question(labs, qid="labs"),
            question("SELECT COUNT(*) FROM microbiologyevents WHERE microbiologyevents.subject_id = 1", qid="micro"),
            question("SELECT labevents.nosuchcolumn FROM labevents WHERE labevents.subject_id = 1", qid="fails"),
            question("SELECT COUNT(*) FROM labevents WHERE labevents.subject_id = 1 AND 0", qid="none"),
            question("SELECT cost.cost FROM cost", qid="cost")]


def test_one_missing_id_empties_the_gold_but_microbiology_only_loses_the_missing_ids(tmp_path):
    path = tmp_path / "raw.sqlite"
    _database(path).commit()
    lab_ids = {uid("ObservationLabevents", "100"), uid("ObservationLabevents", "101")}
    micro_test = uid("ObservationMicroTest", "5-900")

    def present(ids):  # the view has one of the two labs and the micro test only
        return {uid("ObservationLabevents", "100"), micro_test} & set(ids)

    golds = {g.question_id: g for g in ground_split(_questions(), path, present)}
    assert golds["labs"].dropped is None and golds["labs"].answer == [[2]]
    assert golds["labs"].ids == {} and golds["labs"].pruned == 1
    assert golds["micro"].ids == {"Observation": [micro_test]} and golds["micro"].pruned == 3
    assert golds["fails"].dropped.startswith("gold SQL fails on the raw tables")
    assert golds["none"].dropped is None and golds["none"].ids == {} and golds["none"].answer == [[0]]
    assert golds["cost"].dropped == "reads cost"
    assert golds["labs"].patient_fhir_id == uid("Patient", "1")
    assert golds["labs"].sql.endswith("= '2150'")

    everything = {g.question_id: g for g in ground_split(_questions(), path, lambda ids: set(ids))}
    assert everything["labs"].ids == {"Observation": sorted(lab_ids)}


def test_agreement_counts_exact_sets_jaccard_and_ids_by_type():
    ours = [AgentBenchGold("a", "valid", ids={"Observation": ["1", "2"]}, answer=[[2]]),
            AgentBenchGold("b", "valid", ids={"Observation": ["1"]}, answer=[["Abc "]]),
            AgentBenchGold("c", "valid", ids={}, answer=[]),
            AgentBenchGold("d", "valid", dropped="reads cost"),
            AgentBenchGold("e", "valid", ids={})]
    published = {"a": {"Observation": ["1", "2"]}, "b": {"Observation": ["1", "3"], "Patient": ["p"]},
                 "c": {}, "d": {"Encounter": ["x"]}, "z": {"Encounter": ["other split"]}}
    result = agreement(ours, published, {"a": [[2.0]], "b": [["abc"]], "c": [[0]]})
    assert (result.compared, result.exact) == (3, 2)
    assert result.mean_jaccard == pytest.approx((1 + 1 / 3 + 1) / 3)
    assert result.missing == {"Observation": 1, "Patient": 1} and result.extra == {}
    assert result.only_published == ["d"] and result.only_ours == ["e"]
    assert (result.answers_compared, result.answers_equal) == (3, 2)


@pytest.mark.parametrize(("ours", "theirs", "equal"), [
    ([[20.925233644859812]], [[20.92523364]], True),
    ([[1.5]], [[1.6]], False),
    ([["oxycodone (immediate release)"]], [["OxycoDONE (Immediate Release) "]], True),
    ([[None]], [[float("nan")]], True),
    ([], [[None]], False),
])
def test_answers_compare_like_numpy_prints_them(ours, theirs, equal):
    assert same_answer(ours, theirs) is equal


def test_a_split_folder_needs_its_questions_and_answers(tmp_path):
    with pytest.raises(ConfigError, match="answer.json not found"):
        (tmp_path / "annotated.json").write_text("[]")
        read_split(tmp_path)
    (tmp_path / "answer.json").write_text(json.dumps({"q1": "[[1]]"}))
    (tmp_path / "annotated.json").write_text(json.dumps([
        {"id": "q1", "question": "q", "query": "SELECT 1 FROM labevents", "template": "t", "val_dict": {}},
        {"id": "q2", "question": "q", "query": "null", "template": "t", "val_dict": {}}]))
    assert [q.question_id for q in read_split(tmp_path)] == ["q1"]
    (tmp_path / "annotated.json").write_text(json.dumps([{"id": "q1"}]))
    (tmp_path / "answer.json").write_text(json.dumps({"q1": "[[1]]"}))
    with pytest.raises(ConfigError, match="item 0: expected id, question, query"):
        read_split(tmp_path)


@pytest.mark.parametrize(("args", "message"), [
    (["--view", "mimic_iv"], "--view: expected mimic_iv_on_fhir"),
    (["--out", "gold.csv"], "--out: expected a .parquet file"),
    ([], "has no mimic_iv_on_fhir FHIR view"),
])
def test_the_ground_command_refuses_what_it_cannot_ground(tmp_path, args, message):
    from typer.testing import CliRunner

    from ehrbench.cli import app

    base = ["fhir", "ground", "--ehrsql2024-split", str(tmp_path), "--out", str(tmp_path / "gold.parquet"),
            "--data-dir", str(tmp_path)]
    result = CliRunner().invoke(app, base + args)
    assert result.exit_code != 0
    assert message in " ".join(result.output.split())
