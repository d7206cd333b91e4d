"""rename_sql: EHRSQL gold SQL rewritten for the renamed schemas must return what the original returns.

The meaning tests build a tiny SQLite database in the EHRSQL schema, copy it under the renamed (or drawn)
names with the table-naming values renamed too, and run the original and the renamed query side by side."""

from __future__ import annotations

import json
import sqlite3

import pytest

from ehrbench.ehrsql import prepare_gold_sql
from ehrbench.renaming import (
    SchemaRename,
    TableRename,
    draw_random_rename,
    published_rename,
    rename_sql,
    table_name_value_columns,
)
from tests.conftest import SHARED_DATA

EHRSQL_2024_VALID = SHARED_DATA / "ehrsql-2024" / "mimic_iv" / "valid" / "label.json"

# The example of the brief and EHRSQL-2024 valid gold SQL, verbatim.
POTASSIUM = (
    "SELECT COUNT(*)>0 FROM labevents WHERE labevents.itemid IN ( SELECT d_labitems.itemid FROM d_labitems "
    "WHERE d_labitems.label = 'potassium' ) AND labevents.hadm_id IN ( SELECT admissions.hadm_id FROM admissions "
    "WHERE admissions.subject_id = 10021487 )"
)
COST_OF_DIAGNOSIS = (  # a635207e9ad6b0adfff52120
    "SELECT DISTINCT cost.cost FROM cost WHERE cost.event_type = 'diagnoses_icd' AND cost.event_id IN ( SELECT "
    "diagnoses_icd.row_id FROM diagnoses_icd WHERE diagnoses_icd.icd_code = ( SELECT d_icd_diagnoses.icd_code FROM "
    "d_icd_diagnoses WHERE d_icd_diagnoses.long_title = 'secondary malignant neoplasm of bone and bone marrow' ) )"
)
SAME_TIME_PRESCRIPTIONS = (  # 2a8fea2a00fcd986cf1b8067
    "SELECT T1.starttime FROM ( SELECT prescriptions.subject_id, prescriptions.starttime FROM prescriptions WHERE "
    "prescriptions.hadm_id IN ( SELECT admissions.hadm_id FROM admissions WHERE admissions.subject_id = 10018423 ) "
    "AND prescriptions.drug = 'ondansetron' ) AS T1 JOIN ( SELECT prescriptions.subject_id, prescriptions.starttime "
    "FROM prescriptions WHERE prescriptions.hadm_id IN ( SELECT admissions.hadm_id FROM admissions WHERE "
    "admissions.subject_id = 10018423 ) AND prescriptions.drug = 'vancomycin' ) AS T2 ON T1.subject_id = "
    "T2.subject_id WHERE datetime(T1.starttime) = datetime(T2.starttime) ORDER BY T1.starttime ASC LIMIT 1"
)
REPEATED_PROCEDURES = (  # 6cf60ddb53c69a32d984068c
    "SELECT d_icd_procedures.long_title FROM d_icd_procedures WHERE d_icd_procedures.icd_code IN ( SELECT "
    "T1.icd_code FROM ( SELECT procedures_icd.icd_code, COUNT( procedures_icd.charttime ) AS C1 FROM procedures_icd "
    "WHERE procedures_icd.hadm_id IN ( SELECT admissions.hadm_id FROM admissions WHERE admissions.subject_id = "
    "10019777 AND admissions.dischtime IS NOT NULL ORDER BY admissions.admittime ASC LIMIT 1 ) GROUP BY "
    "procedures_icd.icd_code ) AS T1 WHERE T1.C1 >= 2 )"
)
PATIENTS_WITH_TWO_PROCEDURES_THIS_YEAR = (  # 225970019a185c7b566265ff
    "SELECT COUNT(T1.subject_id) FROM ( SELECT admissions.subject_id, COUNT(*) AS C1 FROM procedures_icd JOIN "
    "admissions ON procedures_icd.hadm_id = admissions.hadm_id WHERE procedures_icd.icd_code = ( SELECT "
    "d_icd_procedures.icd_code FROM d_icd_procedures WHERE d_icd_procedures.long_title = 'excision of dental lesion "
    "of jaw' ) AND datetime(procedures_icd.charttime,'start of year') = datetime(current_time,'start of year','-0 "
    "year') GROUP BY admissions.subject_id ) AS T1 WHERE T1.C1 >= 2"
)
ABNORMAL_SAO2 = (  # 41e5c617af3a91492dc2e3d0
    "SELECT 1 - COUNT(*)>0 FROM chartevents WHERE chartevents.stay_id IN ( SELECT icustays.stay_id FROM icustays "
    "WHERE icustays.hadm_id IN ( SELECT admissions.hadm_id FROM admissions WHERE admissions.subject_id = 10016742 "
    "AND admissions.dischtime IS NOT NULL ORDER BY admissions.admittime DESC LIMIT 1 ) ) AND chartevents.itemid IN "
    "( SELECT d_items.itemid FROM d_items WHERE d_items.label = 'o2 saturation pulseoxymetry' AND d_items.linksto = "
    "'chartevents' ) AND chartevents.valuenum NOT BETWEEN sao2_lower AND sao2_upper"
)
# Shapes the gold SQL lacks: unqualified and correlated columns, CTE, UNION, IN lists, USING, ORDER BY an alias.
HANDWRITTEN = (
    "SELECT subject_id, COUNT(*) AS n FROM cost WHERE event_type IN ('labevents', 'diagnoses_icd') "
    "GROUP BY subject_id ORDER BY n DESC, subject_id",
    "WITH firsts AS (SELECT subject_id, MIN(admittime) AS first_admit FROM admissions GROUP BY subject_id) "
    "SELECT p.gender, firsts.first_admit FROM patients p JOIN firsts USING (subject_id) ORDER BY first_admit",
    "SELECT a.hadm_id FROM admissions a WHERE EXISTS (SELECT 1 FROM procedures_icd WHERE hadm_id = a.hadm_id "
    "AND icd_code = 'icd9|2431') ORDER BY 1",
    "SELECT subject_id FROM labevents UNION SELECT subject_id FROM prescriptions ORDER BY subject_id",
    "SELECT label FROM d_items WHERE linksto != 'chartevents' ORDER BY label",
    "SELECT T.* FROM (SELECT row_id, cost FROM cost WHERE cost.event_type = 'labevents') AS T ORDER BY T.row_id",
    "SELECT sub.total FROM (SELECT hadm_id, SUM(cost) AS total FROM cost GROUP BY hadm_id) sub "
    "WHERE sub.hadm_id = 2001",
)


MIMIC_ROWS: dict[str, list[tuple]] = {
    "patients": [(1, 10021487, "f"), (2, 10018423, "m"), (3, 10019777, "m"), (4, 10016742, "f"), (5, 10000001, "m")],
    # row_id, subject_id, hadm_id, admittime, dischtime
    "admissions": [
        (1, 10021487, 2001, "2100-01-01 08:00:00", None),
        (2, 10018423, 2002, "2100-02-01 08:00:00", "2100-02-10 12:00:00"),
        (3, 10019777, 2003, "2100-03-01 08:00:00", "2100-03-05 12:00:00"),
        (4, 10019777, 2004, "2100-04-01 08:00:00", "2100-04-05 12:00:00"),
        (5, 10016742, 2005, "2100-05-01 08:00:00", "2100-05-09 12:00:00"),
        (6, 10000001, 2006, "2100-06-01 08:00:00", "2100-06-10 12:00:00"),
    ],
    "d_labitems": [(1, 50971, "potassium"), (2, 50912, "creatinine")],
    # row_id, subject_id, hadm_id, itemid, charttime, valuenum
    "labevents": [(1, 10021487, 2001, 50971, "2100-01-02 06:00:00", 4.1), (2, 10018423, 2002, 50912, None, 1.2)],
    "d_icd_diagnoses": [(1, "icd9|1985", None, "secondary malignant neoplasm of bone and bone marrow"),
                        (2, "icd9|4019", None, "unspecified essential hypertension")],
    "diagnoses_icd": [(1, 10021487, 2001, "icd9|1985"), (2, 10021487, 2001, "icd9|4019")],
    "d_icd_procedures": [(1, "icd9|3893", None, "venous catheterization, not elsewhere classified"),
                         (2, "icd9|2431", None, "excision of dental lesion of jaw")],
    # row_id, subject_id, hadm_id, icd_code, icd_version, charttime
    "procedures_icd": [
        (1, 10019777, 2003, "icd9|3893", None, "2100-03-02 10:00:00"),
        (2, 10019777, 2003, "icd9|3893", None, "2100-03-03 10:00:00"),
        (3, 10019777, 2004, "icd9|2431", None, "2100-04-02 10:00:00"),
        (4, 10019777, 2004, "icd9|2431", None, "2100-04-03 10:00:00"),
        (5, 10000001, 2006, "icd9|2431", None, "2100-06-02 10:00:00"),
    ],
    # row_id, subject_id, hadm_id, starttime, stoptime, drug
    "prescriptions": [
        (1, 10018423, 2002, "2100-02-03 08:00:00", None, "ondansetron"),
        (2, 10018423, 2002, "2100-02-03 08:00:00", None, "vancomycin"),
        (3, 10018423, 2002, "2100-02-04 09:00:00", None, "ondansetron"),
    ],
    # row_id, subject_id, hadm_id, event_type, event_id, chargetime, cost: the labevents row 1 shares event_id 1
    "cost": [
        (1, 10021487, 2001, "diagnoses_icd", 1, "2100-01-03 00:00:00", 9.5),
        (2, 10021487, 2001, "labevents", 1, "2100-01-03 00:00:00", 3.25),
        (3, 10021487, 2001, "diagnoses_icd", 2, "2100-01-03 00:00:00", 7.0),
    ],
    "d_items": [(1, 220277, "o2 saturation pulseoxymetry", "spo2", "chartevents"),
                (2, 225158, "nacl 0.9%", "nacl", "inputevents")],
    "icustays": [(1, 10016742, 2005, 3005)],
    # row_id, subject_id, hadm_id, stay_id, itemid, charttime, valuenum
    "chartevents": [(1, 10016742, 2005, 3005, 220277, "2100-05-02 10:00:00", 91.0)],
}


def _create(con: sqlite3.Connection, rename: SchemaRename, *, target: bool) -> None:
    for table in rename.tables:
        columns = [target_name if target else source for source, target_name in table.columns]
        con.execute(f"CREATE TABLE {table.target if target else table.source} ({', '.join(columns)})")


def _source_db(rename: SchemaRename, rows: dict[str, list[tuple]]) -> sqlite3.Connection:
    """Every table of `rename`'s source schema; given rows fill the leading columns, the rest stays NULL."""
    con = sqlite3.connect(":memory:")
    _create(con, rename, target=False)
    for name, table_rows in rows.items():
        width = len(rename.table(name).columns)
        con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * width)})",
                        [row + (None,) * (width - len(row)) for row in table_rows])
    return con


def _renamed_copy(source: sqlite3.Connection, rename: SchemaRename) -> sqlite3.Connection:
    """The same rows under `rename`'s target names, with table-naming values renamed like the build does."""
    con = sqlite3.connect(":memory:")
    _create(con, rename, target=True)
    for table in rename.tables:
        rows = source.execute(f"SELECT {', '.join(s for s, _ in table.columns)} FROM {table.source}").fetchall()
        con.executemany(f"INSERT INTO {table.target} VALUES ({', '.join('?' * len(table.columns))})", rows)
    for (table_name, column_name), values in table_name_value_columns(rename).items():
        table = rename.table(table_name)
        column = table.column(column_name)
        for old, new in values.items():
            con.execute(f"UPDATE {table.target} SET {column} = ? WHERE {column} = ?", (new, old))
    return con


def _run(con: sqlite3.Connection, sql: str) -> list[tuple]:
    return con.execute(prepare_gold_sql(sql)).fetchall()


@pytest.fixture(scope="module")
def mimic():
    rename = published_rename("mimic_iv")
    source = _source_db(rename, MIMIC_ROWS)
    return rename, source, _renamed_copy(source, rename)


def test_the_brief_example_reads_naturally():
    rename = published_rename("mimic_iv")
    assert rename_sql(POTASSIUM, rename) == (
        "SELECT COUNT(*)>0 FROM labresults WHERE labresults.itemcode IN ( SELECT labtesttypes.itemcode FROM "
        "labtesttypes WHERE labtesttypes.itemname = 'potassium' ) AND labresults.admissionid IN ( SELECT "
        "hospitaladmissions.admissionid FROM hospitaladmissions WHERE hospitaladmissions.patientid = 10021487 )"
    )


def test_aliases_literals_and_placeholders_keep_their_text():
    rename = published_rename("mimic_iv")
    renamed = rename_sql(ABNORMAL_SAO2, rename, value_columns=table_name_value_columns(rename))
    assert "clinicalitemtypes.itemtype = 'clinicalevents'" in renamed
    assert "clinicalevents.resultvalue" not in renamed and "clinicalevents.value NOT BETWEEN sao2_lower" in renamed
    renamed = rename_sql(PATIENTS_WITH_TWO_PROCEDURES_THIS_YEAR, rename)
    assert renamed.startswith("SELECT COUNT(T1.patientid) FROM ( SELECT hospitaladmissions.patientid, COUNT(*) AS C1")
    assert "datetime(current_time,'start of year','-0 year')" in renamed  # the scorer replaces it case-sensitively


EXPECTED = {
    POTASSIUM: [(1,)],
    COST_OF_DIAGNOSIS: [(9.5,)],
    SAME_TIME_PRESCRIPTIONS: [("2100-02-03 08:00:00",)],
    REPEATED_PROCEDURES: [("venous catheterization, not elsewhere classified",)],
    PATIENTS_WITH_TWO_PROCEDURES_THIS_YEAR: [(1,)],
    ABNORMAL_SAO2: [(0,)],
}


@pytest.mark.parametrize("sql", list(EXPECTED) + list(HANDWRITTEN))
def test_renamed_query_returns_what_the_original_returns(mimic, sql):
    rename, source, renamed = mimic
    original = _run(source, sql)
    if sql in EXPECTED:
        assert original == EXPECTED[sql]  # the data exercise the query
    else:
        assert original  # ... and are not empty
    value_columns = table_name_value_columns(rename)
    assert _run(renamed, rename_sql(sql, rename, value_columns=value_columns)) == original


def test_without_value_renames_the_table_naming_comparisons_break(mimic):
    rename, source, renamed = mimic
    assert _run(renamed, rename_sql(COST_OF_DIAGNOSIS, rename)) != _run(source, COST_OF_DIAGNOSIS)
    assert _run(renamed, rename_sql(ABNORMAL_SAO2, rename)) != _run(source, ABNORMAL_SAO2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_rename_on_top_of_the_published_one(mimic, seed):
    """Gold SQL → renamed SQL → drawn SQL runs on the drawn copy of the renamed database, and renaming the
    gold SQL once with the composed map gives the same text."""
    published, source, renamed = mimic
    drawn = draw_random_rename(published, seed)
    drawn_db = _renamed_copy(renamed, drawn)
    composed = published.then(drawn)
    for sql in list(EXPECTED) + list(HANDWRITTEN):
        renamed_sql = rename_sql(sql, published, value_columns=table_name_value_columns(published))
        drawn_sql = rename_sql(renamed_sql, drawn, value_columns=table_name_value_columns(drawn))
        assert drawn_sql == rename_sql(sql, composed, value_columns=table_name_value_columns(composed))
        assert _run(drawn_db, drawn_sql) == _run(source, sql)


def test_eicu_cost_event_types_name_the_renamed_tables():
    rename = published_rename("eicu")
    source = _source_db(rename, {
        "patient": [("002-1", 1, 141001), ("002-2", 2, 141002)],
        "diagnosis": [(10, 141001, "sepsis"), (11, 141002, "acute respiratory failure")],
        "lab": [(10, 141001, "lactate", 4.2)],
        # costid, patienthealthsystemstayid, patientunitstayid, eventtype, eventid, chargetime, cost
        "cost": [(1, 1, 141001, "diagnosis", 10, None, 120.0), (2, 1, 141001, "lab", 10, None, 15.0),
                 (3, 2, 141002, "diagnosis", 11, None, 80.0)],
    })
    renamed = _renamed_copy(source, rename)
    assert renamed.execute("SELECT DISTINCT event_type FROM cost ORDER BY 1").fetchall() == [("condition",), ("lab",)]
    sql = (
        "SELECT DISTINCT cost.cost FROM cost WHERE cost.eventtype = 'diagnosis' AND cost.eventid IN ( SELECT "
        "diagnosis.diagnosisid FROM diagnosis WHERE diagnosis.diagnosisname = 'sepsis' )"
    )
    renamed_sql = rename_sql(sql, rename, value_columns=table_name_value_columns(rename))
    assert renamed_sql == (
        "SELECT DISTINCT cost.cost_amount FROM cost WHERE cost.event_type = 'condition' AND cost.event_id IN ( SELECT "
        "condition.condition_id FROM condition WHERE condition.condition_name = 'sepsis' )"
    )
    assert _run(renamed, renamed_sql) == _run(source, sql) == [(120.0,)]


def test_table_name_value_columns_follow_the_schema_the_rename_starts_from():
    published = published_rename("mimic_iv")
    assert set(table_name_value_columns(published)) == {("cost", "event_type"), ("d_items", "linksto")}
    drawn = draw_random_rename(published, 4)
    values = table_name_value_columns(drawn)
    assert set(values) == {("costrecords", "eventtype"), ("clinicalitemtypes", "itemtype")}
    assert values["costrecords", "eventtype"]["labresults"] == drawn.table("labresults").target
    assert set(table_name_value_columns(published_rename("eicu"))) == {("cost", "eventtype")}
    with pytest.raises(ValueError, match="starts neither"):
        table_name_value_columns(SchemaRename("mimic_iv", (TableRename("cost", "c", ()),)))


@pytest.mark.parametrize("sql, message", [
    ("SELECT * FROM noteevents", "unknown table 'noteevents'"),
    ("SELECT patients.height FROM patients", r"unknown column patients\.height"),
    ("SELECT height FROM patients", "unknown column 'height'"),
    ("SELECT p.dob FROM patients", "'p', which is no table or alias"),
    ("SELECT intime FROM icustays JOIN transfers ON icustays.hadm_id = transfers.hadm_id", "ambiguous column 'intime'"),
    ("DELETE FROM patients", "only queries"),
    ("SELEC dob FROM patients", "cannot parse"),
])
def test_errors_name_what_is_wrong(sql, message):
    with pytest.raises(ValueError, match=message):
        rename_sql(sql, published_rename("mimic_iv"))


def test_an_alias_wins_over_a_column_in_order_by():
    # SQLite sorts by the result column `dob` (a count), not by patients.dob
    sql = "SELECT gender, COUNT(*) AS dob FROM patients GROUP BY gender ORDER BY dob"
    assert rename_sql(sql, published_rename("mimic_iv")) == (
        "SELECT gender, COUNT(*) AS dob FROM demographics GROUP BY gender ORDER BY dob"
    )


def test_duckdb_dialect_and_quoted_names():
    sql = 'SELECT "LabEvents"."VALUENUM", l.charttime FROM "LabEvents" JOIN labevents AS l ON l.row_id = 1'
    assert rename_sql(sql, published_rename("mimic_iv"), dialect="duckdb") == (
        'SELECT "labresults"."resultvalue", l.resultdatetime FROM "labresults" JOIN labresults AS l ON l.recordid = 1'
    )


@pytest.mark.slow
def test_every_published_valid_query_renames_and_renames_back():
    """All EHRSQL-2024 valid gold SQL renames without error, and the inverse rename gives back the original text
    character for character (so nothing but names and table-naming values moved)."""
    if not EHRSQL_2024_VALID.is_file():
        pytest.skip(f"EHRSQL-2024 data not found at {EHRSQL_2024_VALID}")
    queries = [sql for sql in json.loads(EHRSQL_2024_VALID.read_text()).values() if sql != "null"]
    assert len(queries) > 900
    rename = published_rename("mimic_iv")
    inverse = SchemaRename(rename.database, tuple(
        TableRename(t.target, t.source, tuple((target, source) for source, target in t.columns)) for t in rename.tables
    ))
    forward_values = table_name_value_columns(rename)
    backward_values = {
        (rename.table(table).target, rename.table(table).column(column)): {new: old for old, new in mapping.items()}
        for (table, column), mapping in forward_values.items()
    }
    for sql in queries:
        renamed = rename_sql(sql, rename, value_columns=forward_values)
        # the inverse knows only the renamed names, so it would also fail on anything left unrenamed
        assert rename_sql(renamed, inverse, value_columns=backward_values) == sql
