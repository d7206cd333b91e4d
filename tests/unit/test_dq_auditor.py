"""The rule-based reference auditor on hand-made audit folders (each check: its planted error caught, the clean rows
next to it left alone) and on the real pristine extract (it runs, and flags only a small share)."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from ehrbench.dq.auditor import CHECKS, Finding, audit, flagged_rows, write_flagged_rows
from ehrbench.dq.score import read_submission
from tests.unit.dq_columns import COLUMNS

P1, P2 = "10000001", "10000002"
A1, A2 = "20000001", "20000002"  # A1 is P1's admission, A2 is P2's
DAY = "2150-01-02"


def write_folder(root: Path, tables: dict[str, list[dict]]) -> Path:
    """An audit folder: one <table>.csv.gz per table, `_row_id` first, missing cells empty (null)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, rows in tables.items():
        with gzip.open(root / f"{name}.csv.gz", "wt", newline="") as handle:
            writer = csv.DictWriter(handle, ["_row_id", *COLUMNS[name]], restval="")
            writer.writeheader()
            writer.writerows(rows)
    return root


def base() -> dict[str, list[dict]]:
    """A clean extract: two patients with one admission each and the dictionaries of the codes used below."""
    return {
        "patients": [dict(_row_id="pat1", patient_id=P1, sex="F", birth_date="2080-05-01"),
                     dict(_row_id="pat2", patient_id=P2, sex="M", birth_date="2090-05-01")],
        "admissions": [
            dict(_row_id="adm1", admission_id=A1, patient_id=P1, admit_time=f"{DAY} 08:00:00",
                 discharge_time="2150-01-09 12:00:00", age_at_admission="69"),
            dict(_row_id="adm2", admission_id=A2, patient_id=P2, admit_time=f"{DAY} 09:00:00",
                 discharge_time="2150-01-05 12:00:00", age_at_admission="59")],
        "lab_tests": [dict(_row_id=f"test{code}", test_code=code, name=name) for code, name in
                      [("50912", "Creatinine"), ("50931", "Glucose"), ("50983", "Sodium"), ("51277", "RDW")]],
        "chart_items": [dict(_row_id=f"item{code}", item_code=code, name=name) for code, name in
                        [("220045", "Heart Rate"), ("225664", "Glucose finger stick"), ("220645", "Sodium")]],
        "lab_results": [], "chart_observations": [], "medication_orders": [], "diagnoses": [], "icu_stays": [],
    }


def lab(row_id, code, at, value, unit="mg/dL", patient=P1, admission=A1) -> dict:
    return dict(_row_id=row_id, patient_id=patient, admission_id=admission, test_code=code,
                charted_at=f"{DAY} {at}", value=value, unit=unit)


def chart(row_id, code, at, value, unit="mg/dL", patient=P1, admission=A1) -> dict:
    return dict(_row_id=row_id, patient_id=patient, admission_id=admission, stay_id="30000001", item_code=code,
                charted_at=f"{DAY} {at}", value=value, unit=unit)


def run(tmp_path: Path, tables: dict, checks=CHECKS) -> set[tuple[str, str, str]]:
    return {(f.table, f.row_id, f.check) for f in audit(write_folder(tmp_path / "data", tables), checks)}


def test_range_flags_values_outside_the_plausible_band(tmp_path):
    tables = base()
    tables["lab_results"] = [
        lab("crea_ok", "50912", "10:00:00", "1.1"),
        lab("crea_umol", "50912", "11:00:00", "97.3"),  # 1.1 mg/dL x 88.42, still labelled mg/dL
        lab("glu_mmol", "50931", "10:00:00", "5.55"),  # 100 mg/dL x 0.0555: below the band
        lab("rdw_no_band", "51277", "10:00:00", "1000", unit="%"),  # no plausible band: never a range finding
        lab("crea_text", "50912", "12:00:00", "<0.1"),  # not a number: nothing to compare
    ]
    tables["chart_observations"] = [chart("hr_ok", "220045", "10:00:00", "80.0", "bpm"),
                                    chart("hr_extreme", "220045", "11:00:00", "350.0", "bpm")]
    found = run(tmp_path, tables, ["range"])
    assert found == {("lab_results", "crea_umol", "range"), ("lab_results", "glu_mmol", "range"),
                     ("chart_observations", "hr_extreme", "range")}


def test_unit_flags_a_minority_label_only_when_the_predominant_unit_covers_95_percent(tmp_path):
    tables = base()
    # glucose: 40 of 42 rows (95.2 %) in mg/dL, one relabelled mmol/L; a null unit is missing, not another unit
    tables["lab_results"] = [lab(f"glu{i}", "50931", "10:00:00", "100") for i in range(40)]
    tables["lab_results"] += [lab("glu_mmol", "50931", "20:30:00", "100", unit="mmol/L"),
                              lab("glu_null", "50931", "21:30:00", "100", unit="")]
    # creatinine: 9 of 10 rows (90 %) in mg/dL: genuinely mixed units, no finding
    tables["lab_results"] += [lab(f"crea{i}", "50912", f"{i:02d}:00:00", "1.0") for i in range(9)]
    tables["lab_results"] += [lab("crea_umol", "50912", "09:30:00", "1.0", unit="umol/L")]
    assert run(tmp_path, tables, ["unit"]) == {("lab_results", "glu_mmol", "unit")}


def test_duplicate_flags_both_rows_of_a_changed_copy_within_5_minutes(tmp_path):
    tables = base()
    tables["lab_results"] = [
        lab("orig", "50912", "10:00:00", "1.0"), lab("copy", "50912", "10:03:00", "1.3"),  # altered copy
        lab("far1", "50912", "14:00:00", "1.0"), lab("far2", "50912", "14:10:00", "1.3"),  # 10 minutes apart
        lab("same1", "50931", "10:00:00", "100"), lab("same2", "50931", "10:00:00", "100.0"),  # equal values
        lab("other_patient", "50912", "10:01:00", "2.0", patient=P2, admission=A2),  # another patient
        lab("other_code", "50983", "10:02:00", "140", unit="mEq/L"),  # another test, close to orig
    ]
    tables["chart_observations"] = [chart("hr1", "220045", "10:00:00", "80.0", "bpm"),
                                    chart("hr2", "220045", "10:00:00", "104.0", "bpm"),  # same minute, other value
                                    chart("hr3", "220045", "10:06:00", "81.0", "bpm")]  # 6 minutes after hr2
    assert run(tmp_path, tables, ["duplicate"]) == {
        ("lab_results", "orig", "duplicate"), ("lab_results", "copy", "duplicate"),
        ("chart_observations", "hr1", "duplicate"), ("chart_observations", "hr2", "duplicate")}


def test_duplicate_finds_every_close_pair_not_only_neighbours(tmp_path):
    tables = base()
    # b and c repeat a's value; the changed d is close to all three, so all four are flagged
    tables["lab_results"] = [lab(name, "50912", at, value) for name, at, value in
                             [("a", "10:00:00", "1.0"), ("b", "10:01:00", "1.0"), ("c", "10:02:00", "1.0"),
                              ("d", "10:05:00", "1.4"), ("e", "10:11:00", "1.0")]]
    found = {row for _, row, _ in run(tmp_path, tables, ["duplicate"])}
    assert found == {"a", "b", "c", "d"}


def test_cross_table_flags_a_lab_result_copied_into_the_chart_with_another_value(tmp_path):
    tables = base()
    tables["lab_results"] = [
        lab("glu_lab", "50931", "10:00:00", "100"),
        lab("na_lab", "50983", "10:00:00", "140", unit="mEq/L"),
        lab("glu_lab_late", "50931", "16:00:00", "100"),
    ]
    tables["chart_observations"] = [
        chart("glu_chart", "225664", "10:00:00", "150.0"),  # x1.5 at the same time
        chart("na_chart", "220645", "10:02:00", "145.0", "mEq/L"),  # within 10 %
        chart("glu_chart_far", "225664", "16:10:00", "150.0"),  # 10 minutes after its lab result
        chart("glu_other_patient", "225664", "10:00:00", "150.0", patient=P2, admission=A2),
    ]
    assert run(tmp_path, tables, ["cross_table"]) == {("lab_results", "glu_lab", "cross_table"),
                                                      ("chart_observations", "glu_chart", "cross_table")}


def test_temporal_flags_events_in_an_impossible_order(tmp_path):
    tables = base()
    tables["patients"][1]["death_date"] = "2150-01-01"  # P2 died the day before A2
    tables["patients"].append(dict(_row_id="pat3", patient_id="10000003", sex="F", birth_date="2070-01-01",
                                   death_date=DAY))  # died on the day of A3: not before it
    tables["admissions"].append(dict(_row_id="adm3", admission_id="20000003", patient_id="10000003",
                                     admit_time=f"{DAY} 23:00:00", discharge_time=f"{DAY} 23:30:00"))
    tables["admissions"][0]["discharge_time"] = f"{DAY} 07:00:00"  # A1 discharged before admitted
    tables["medication_orders"] = [
        dict(_row_id="med_bad", patient_id=P1, admission_id=A1, start_time=f"{DAY} 10:00:00",
             stop_time=f"{DAY} 09:00:00", drug="Heparin"),
        dict(_row_id="med_ok", patient_id=P1, admission_id=A1, start_time=f"{DAY} 10:00:00",
             stop_time=f"{DAY} 11:00:00", drug="Heparin"),
        dict(_row_id="med_open", patient_id=P1, admission_id=A1, start_time=f"{DAY} 10:00:00", drug="Heparin"),
    ]
    assert run(tmp_path, tables, ["temporal"]) == {
        ("admissions", "adm1", "temporal"), ("medication_orders", "med_bad", "temporal"),
        ("patients", "pat2", "temporal"), ("admissions", "adm2", "temporal")}


def test_reference_flags_unknown_and_other_patients_admissions_and_unknown_codes(tmp_path):
    tables = base()
    tables["lab_results"] = [
        lab("ok", "50912", "10:00:00", "1.0"),
        lab("outpatient", "50912", "11:00:00", "1.0", admission=""),  # null admission: not an orphan
        lab("no_admission", "50912", "12:00:00", "1.0", admission="29999999"),
        lab("no_test", "99999", "13:00:00", "1.0"),
    ]
    tables["chart_observations"] = [chart("hr_ok", "220045", "10:00:00", "80.0", "bpm"),
                                    chart("hr_of_p2", "220045", "11:00:00", "80.0", "bpm", admission=A2),
                                    chart("no_item", "123456", "12:00:00", "80.0", "bpm")]
    tables["medication_orders"] = [dict(_row_id="med_orphan", patient_id=P1, admission_id="29999999",
                                        start_time=f"{DAY} 10:00:00")]
    tables["diagnoses"] = [dict(_row_id="dx_ok", patient_id=P1, admission_id=A1, sequence="1", icd_code="I10"),
                           dict(_row_id="dx_of_p1", patient_id=P2, admission_id=A1, sequence="1", icd_code="I10")]
    tables["icu_stays"] = [dict(_row_id="icu_orphan", stay_id="30000001", patient_id=P1, admission_id="29999998")]
    assert run(tmp_path, tables, ["reference"]) == {
        ("lab_results", "no_admission", "reference"), ("lab_results", "no_test", "reference"),
        ("chart_observations", "hr_of_p2", "reference"), ("chart_observations", "no_item", "reference"),
        ("medication_orders", "med_orphan", "reference"), ("diagnoses", "dx_of_p1", "reference"),
        ("icu_stays", "icu_orphan", "reference")}


def test_missing_tables_skip_the_checks_that_need_them(tmp_path):
    only_labs = {"lab_results": [lab("crea_umol", "50912", "11:00:00", "97.3"),
                                 lab("no_admission", "50912", "12:00:00", "1.0", admission="29999999")]}
    # no dictionaries, admissions or chart: range still runs, reference and cross_table have nothing to compare
    assert run(tmp_path, only_labs) == {("lab_results", "crea_umol", "range")}
    empty = tmp_path / "empty"
    empty.mkdir()
    assert audit(empty) == []


def test_empty_tables_and_null_columns_find_nothing(tmp_path):
    tables = base()  # header-only measurement, order and stay tables
    assert run(tmp_path / "empty", tables) == set()
    tables["lab_results"] = [dict(_row_id="bare", patient_id=P1, test_code="50912")]  # no time, value or unit
    tables["chart_observations"] = [dict(_row_id="bare", patient_id=P1, item_code="220045")]
    tables["medication_orders"] = [dict(_row_id="bare", patient_id=P1)]
    assert run(tmp_path / "nulls", tables) == set()


def test_findings_are_sorted_and_a_row_keeps_every_check_that_found_it(tmp_path):
    tables = base()
    tables["lab_results"] = [lab("z_crea", "50912", "10:00:00", "97.3", admission="29999999"),
                             lab("a_crea", "50912", "10:02:00", "1.1")]
    findings = audit(write_folder(tmp_path / "data", tables))
    assert findings == sorted(findings)
    assert [(f.row_id, f.check) for f in findings] == [("a_crea", "duplicate"), ("z_crea", "duplicate"),
                                                       ("z_crea", "range"), ("z_crea", "reference")]
    assert all(f.reason for f in findings)
    assert flagged_rows(findings) == [("lab_results", "a_crea"), ("lab_results", "z_crea")]
    with pytest.raises(ValueError, match="unknown check"):
        audit(tmp_path / "data", ["range", "spelling"])


def test_written_flagged_rows_read_back_as_the_same_pairs(tmp_path):
    findings = [Finding("lab_results", "00000000000000ab", "range", "r"),
                Finding("lab_results", "00000000000000ab", "unit", "u"),
                Finding("patients", "00000000000000cd", "temporal", "t")]
    path = tmp_path / "out" / "flagged_rows.csv"
    write_flagged_rows(findings, path)
    assert path.read_text().splitlines()[0] == "table,_row_id"
    submission = read_submission(path)
    assert submission.problem is None
    assert submission.rows == set(flagged_rows(findings)) == {("lab_results", "00000000000000ab"),
                                                              ("patients", "00000000000000cd")}
    write_flagged_rows([], path)
    assert read_submission(path).rows == set()


def test_the_audit_command_writes_a_submission_of_the_flagged_rows(tmp_path):
    from typer.testing import CliRunner

    from ehrbench.cli import app

    tables = base()
    tables["chart_observations"] = [chart("hr_ok", "220045", "10:00:00", "80.0", "bpm"),
                                    chart("hr_extreme", "220045", "11:00:00", "350.0", "bpm")]
    write_folder(tmp_path / "task" / "data", tables)
    out = tmp_path / "flagged.csv"
    result = CliRunner().invoke(app, ["dq", "audit", str(tmp_path / "task"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "1 rows flagged (range 1)" in result.output
    assert read_submission(out).rows == {("chart_observations", "hr_extreme")}

    empty = CliRunner().invoke(app, ["dq", "audit", str(tmp_path / "nothing"), "--out", str(out)])
    assert empty.exit_code == 1 and "no tables" in empty.output
