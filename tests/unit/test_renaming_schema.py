"""The published EHR-ChatQA rename map (seed CSV) and SchemaRename's composition and serialised forms."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from ehrbench.renaming import SchemaRename, TableRename, draw_random_rename, published_rename
from ehrbench.renaming.schema_rename import DEFAULT_RENAME_MAP, RENAME_MAP_FIELDS

EHRSQL_MIMIC_TABLES = [
    "patients", "admissions", "d_icd_diagnoses", "d_icd_procedures", "d_labitems", "d_items", "diagnoses_icd",
    "procedures_icd", "labevents", "prescriptions", "cost", "chartevents", "inputevents", "outputevents",
    "microbiologyevents", "icustays", "transfers",
]
EHRSQL_EICU_TABLES = [
    "patient", "diagnosis", "treatment", "lab", "medication", "cost", "allergy", "intakeoutput", "microlab",
    "vitalperiodic", "hospital",
]


def _seed_rows(database: str) -> list[dict[str, str]]:
    with DEFAULT_RENAME_MAP.open(newline="") as handle:
        return [row for row in csv.DictReader(handle) if row["db"] == database]


def _write_map(path: Path, rows: list[dict[str, str]], fields: tuple[str, ...] = RENAME_MAP_FIELDS) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def _row(source_table, target_table, source_column, target_column, db="mimic_iv") -> dict[str, str]:
    return dict(zip(RENAME_MAP_FIELDS, (db, source_table, target_table, source_column, target_column), strict=True))


@pytest.mark.parametrize("database, tables", [("mimic_iv", EHRSQL_MIMIC_TABLES), ("eicu", EHRSQL_EICU_TABLES)])
def test_published_map_covers_the_ehrsql_tables_in_csv_order(database, tables):
    rename = published_rename(database)
    assert [table.source for table in rename.tables] == tables
    flattened = [
        (table.source, table.target, source, target) for table in rename.tables for source, target in table.columns
    ]
    expected = [
        (row["source_table"], row["target_table"], row["source_column"], row["target_column"])
        for row in _seed_rows(database)
    ]
    assert flattened == expected


def test_published_names_of_a_few_tables_and_columns():
    mimic, eicu = published_rename("mimic_iv"), published_rename("eicu")
    assert mimic.table("labevents").target == "labresults"
    assert mimic.table("labevents").column("subject_id") == "patientid"
    assert mimic.table("d_items").column("linksto") == "itemtype"
    assert eicu.table("patient").target == "icupatient"
    assert eicu.table("lab").column("patientunitstayid") == "unit_id"


def test_missing_names_raise_key_errors_that_name_them():
    mimic = published_rename("mimic_iv")
    with pytest.raises(KeyError, match="labevents.*'stay_id'"):
        mimic.table("labevents").column("stay_id")
    with pytest.raises(KeyError, match="'noteevents'"):
        mimic.table("noteevents")


def test_dict_form_round_trips_through_json():
    rename = published_rename("mimic_iv")
    data = json.loads(json.dumps(rename.to_dict()))
    assert data["database"] == "mimic_iv"
    assert data["tables"][0] == {
        "source": "patients",
        "target": "demographics",
        "columns": [["row_id", "recordid"], ["subject_id", "patientid"], ["gender", "gender"],
                    ["dob", "dateofbirth"], ["dod", "dateofdeath"]],
    }
    assert SchemaRename.from_dict(data) == rename


def test_dbt_var_and_table_name_values():
    rename = published_rename("eicu")
    var = rename.dbt_var()
    assert list(var) == EHRSQL_EICU_TABLES
    assert var["medication"]["name"] == "prescription"
    assert list(var["medication"]["columns"].items())[:2] == [
        ("medicationid", "prescription_id"), ("patientunitstayid", "unit_id"),
    ]
    values = rename.table_name_values()
    assert values["diagnosis"] == "condition" and values["medication"] == "prescription" and values["lab"] == "lab"


def test_composition_maps_the_source_straight_to_the_last_target():
    published = published_rename("mimic_iv")
    drawn = draw_random_rename(published, seed=3)
    composed = published.then(drawn)
    labs = composed.table("labevents")
    assert labs.target == drawn.table("labresults").target
    assert labs.column("subject_id") == drawn.table("labresults").column("patientid")
    assert [t.source for t in composed.tables] == EHRSQL_MIMIC_TABLES
    assert SchemaRename.from_dict(composed.to_dict()) == composed


def test_composition_drops_tables_the_first_rename_does_not_produce():
    first = SchemaRename("db", (TableRename("a", "b", (("x", "y"),)),))
    second = SchemaRename("db", (TableRename("b", "c", (("y", "z"), ("w", "v"))), TableRename("q", "r", ())))
    assert first.then(second) == SchemaRename("db", (TableRename("a", "c", (("x", "z"),)),))


def test_composition_errors_name_the_missing_table_or_column():
    first = SchemaRename("db", (TableRename("a", "b", (("x", "y"),)),))
    with pytest.raises(ValueError, match="no table 'b'"):
        first.then(SchemaRename("db", (TableRename("other", "c", (("y", "z"),)),)))
    with pytest.raises(ValueError, match=r"no column b\.y"):
        first.then(SchemaRename("db", (TableRename("b", "c", (("u", "z"),)),)))
    with pytest.raises(ValueError, match="cannot compose"):
        first.then(SchemaRename("other_db", ()))


def test_a_rename_rejects_duplicate_names():
    with pytest.raises(ValueError, match=r"table 'a': duplicate target column\(s\) y"):
        TableRename("a", "b", (("x", "y"), ("w", "y")))
    with pytest.raises(ValueError, match="duplicate target table.*b"):
        SchemaRename("db", (TableRename("a", "b", ()), TableRename("c", "b", ())))


def test_csv_without_a_required_column(tmp_path):
    path = _write_map(tmp_path / "map.csv", [_row("a", "b", "x", "y")], fields=RENAME_MAP_FIELDS[:-1])
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}.*missing column\(s\) target_column"):
        published_rename("mimic_iv", path)


def test_csv_without_the_database(tmp_path):
    path = _write_map(tmp_path / "map.csv", [_row("a", "b", "x", "y", db="eicu")])
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}.*no rows with db 'mimic_iv'.*eicu"):
        published_rename("mimic_iv", path)


def test_csv_with_a_duplicate_target_table(tmp_path):
    path = _write_map(tmp_path / "map.csv", [_row("a", "t", "x", "y"), _row("b", "t", "x", "y")])
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}.*duplicate target table\(s\) t"):
        published_rename("mimic_iv", path)


def test_csv_with_a_duplicate_target_column(tmp_path):
    path = _write_map(tmp_path / "map.csv", [_row("a", "t", "x", "y"), _row("a", "t", "w", "y")])
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}.*table 'a': duplicate target column\(s\) y"):
        published_rename("mimic_iv", path)


def test_csv_with_two_target_names_for_one_table(tmp_path):
    path = _write_map(tmp_path / "map.csv", [_row("a", "t", "x", "y"), _row("a", "u", "w", "z")])
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}, line 3: target_table 'u' contradicts 't'"):
        published_rename("mimic_iv", path)


def test_csv_with_an_empty_field(tmp_path):
    path = _write_map(tmp_path / "map.csv", [_row("a", "t", "x", "")])
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}, line 2: empty field\(s\) target_column"):
        published_rename("mimic_iv", path)
