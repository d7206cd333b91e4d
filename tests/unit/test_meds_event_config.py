"""MEDS event configurations (ehrbench.meds.event_config, ehrbench.meds.convert) on tiny hand-written raw tables: every
rule of MEDS-Extract 0.7's configuration language that MIMIC_IV_MEDS's event_configs.yaml uses, with the events
expected worked out here from those rules (its file's comments: a bare null component drops the row, `??` coalesces
it; `::?` is non-strict; the pre-MEDS death time is the earliest admission deathtime, else dod)."""

from __future__ import annotations

import gzip
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from ehrbench.errors import MissingInputError, ValidationError
from ehrbench.meds.convert import convert, csv_relation, main
from ehrbench.meds.event_config import load_event_config, parse_event_config

PATIENTS = "subject_id,gender,anchor_age,anchor_year,dod\n1,F,30,2150,\n2,M,60,2140,2145-03-04\n3,,40,2160,\n"
ADMISSIONS = ("subject_id,hadm_id,admittime,dischtime,deathtime,admission_type,admission_location\n"
              "1,11,2150-01-01 10:00:00,2150-01-05 12:30:00,,URGENT,\n"
              "2,21,2144-02-01 08:00:00,2144-02-09 09:00:00,2144-02-09 09:00:00,EW EMER.,ER\n"
              "2,22,2144-01-01 08:00:00,2144-01-03 09:00:00,2144-01-03 09:00:00,ELECTIVE,CLINIC\n")
LABS = ("subject_id,hadm_id,itemid,storetime,value,valuenum,valueuom\n"
        "1,11,50912,2150-01-02 03:04:05,1.2,1.2,mg/dL\n"
        "1,11,50813,2150-01-02 03:04:05,NEG,,\n"
        "2,,50912,,0.9,0.9,mg/dL\n")
PHARMACY = "subject_id,medication,starttime\n1,Aspirin,2150-01-02 08:00:00\n1,Heparin,2150-01-03\n1,,not a time\n"


def write_release(root: Path, tables: dict[str, str]) -> Path:
    for name, text in tables.items():
        path = root / f"{name}.csv.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt", newline="") as handle:
            handle.write(text)
    return root


def events_of(config: dict, data: Path) -> list[tuple]:
    table = convert(parse_event_config(config), csv_relation(data))
    return [tuple(row.values()) for row in table.to_pylist()]


@pytest.fixture
def data(tmp_path):
    return write_release(tmp_path / "data", {"hosp/patients": PATIENTS, "hosp/admissions": ADMISSIONS,
                                             "hosp/labevents": LABS, "hosp/pharmacy": PHARMACY})


def test_a_null_code_component_drops_the_event_and_a_coalesced_one_writes_its_default(data):
    config = {"hosp/admissions": {
        "bare": {"code": 'f"ADM//{$admission_type}//{$admission_location}"', "time": '$admittime::"%Y-%m-%d %H:%M:%S"'},
        "coalesced": {"code": "f\"ADMIT//{$admission_location ?? 'UNK'}\"", "time": '$admittime::"%Y-%m-%d %H:%M:%S"'}}}
    codes = sorted(code for _, _, code, _, _ in events_of(config, data))
    # subject 1's admission has no location: its bare code is dropped, its coalesced code says UNK
    assert codes == ["ADM//ELECTIVE//CLINIC", "ADM//EW EMER.//ER", "ADMIT//CLINIC", "ADMIT//ER", "ADMIT//UNK"]


def test_static_events_keep_their_null_time_and_timed_events_without_a_time_are_dropped(data):
    config = {"hosp/patients": {"gender": {"code": 'f"GENDER//{$gender}"', "time": None},
                                "death": {"code": "MEDS_DEATH", "time": '$dod::?"%Y-%m-%d"'}}}
    # patient 3 has no gender (null component), only patient 2 a dod
    assert events_of(config, data) == [(1, None, "GENDER//F", None, None), (2, None, "GENDER//M", None, None),
                                       (2, datetime(2145, 3, 4), "MEDS_DEATH", None, None)]


def test_the_etl_death_time_is_the_earliest_admission_deathtime_else_dod_and_birth_is_1_january(data):
    config = {"hosp/patients": {
        "_table": {"join": {"hosp/admissions": {"key": "subject_id", "cols": ["deathtime"], "aggregate": "min"}},
                   "cols": {"year_of_birth": "($anchor_year - $anchor_age)::str"}},
        "dob": {"code": "MEDS_BIRTH", "time": "$year_of_birth::year"},
        "death": {"code": "MEDS_DEATH",
                  "time": 'coalesce($deathtime::?"%Y-%m-%d %H:%M:%S", $dod::?"%Y-%m-%d")'}}}
    assert events_of(config, data) == [
        (1, datetime(2120, 1, 1), "MEDS_BIRTH", None, None),
        (2, datetime(2080, 1, 1), "MEDS_BIRTH", None, None),
        (2, datetime(2144, 1, 3, 9), "MEDS_DEATH", None, None),  # the earlier of two admissions' deathtimes
        (3, datetime(2120, 1, 1), "MEDS_BIRTH", None, None)]


def test_values_a_join_on_another_tables_key_and_lenient_time_formats(data):
    config = {
        "hosp/labevents": {
            "_table": {"join": {"hosp/admissions": {"key": "hadm_id", "cols": ["dischtime"]}}},
            "result": {"code": "f\"LAB//{$itemid}//{$valueuom ?? 'UNK'}\"", "time": '$storetime::"%Y-%m-%d %H:%M:%S"',
                       "numeric_value": "$valuenum", "text_value": "$value"},
            "at_discharge": {"code": '"LAB_AT_DISCHARGE"', "time": '$dischtime::"%Y-%m-%d %H:%M:%S"'}},
        "hosp/pharmacy": {"start": {"code": "f\"MED//{$medication ?? 'UNK'}\"", "time":
                                    'coalesce($starttime::?"%Y-%m-%d %H:%M:%S", $starttime::?"%Y-%m-%d")'}}}
    assert events_of(config, data) == [
        (1, datetime(2150, 1, 2, 3, 4, 5), "LAB//50813//UNK", None, "NEG"),  # no number, a text
        (1, datetime(2150, 1, 2, 3, 4, 5), "LAB//50912//mg/dL", pytest.approx(1.2), "1.2"),
        (1, datetime(2150, 1, 2, 8), "MED//Aspirin", None, None),
        (1, datetime(2150, 1, 3), "MED//Heparin", None, None),  # a date-only time, read by the second format
        (1, datetime(2150, 1, 5, 12, 30), "LAB_AT_DISCHARGE", None, None),
        (1, datetime(2150, 1, 5, 12, 30), "LAB_AT_DISCHARGE", None, None)]
    # subject 2's lab has neither a store time nor an admission; "not a time" parses as neither format


def test_a_strict_time_that_does_not_parse_is_an_error_not_a_silent_drop(data):
    config = {"hosp/pharmacy": {"start": {"code": "MED", "time": '$starttime::"%Y-%m-%d %H:%M:%S"'}}}
    with pytest.raises(Exception, match="not a time|2150-01-03"):
        events_of(config, data)


@pytest.mark.parametrize(("config", "message"), [
    ({"hosp/admissions": {"a": {"code": "X"}}}, r"hosp/admissions\.a: an event needs `code` and `time`"),
    ({"hosp/admissions": {"a": {"code": "f\"X//{$a ?? UNK}\"", "time": None}}}, r"hosp/admissions\.a\.code"),
    ({"hosp/admissions": {"a": {"code": "X", "time": "$admittime::hour"}}}, r"hosp/admissions\.a\.time"),
    ({"hosp/admissions": {"a": {"code": "X", "time": None, "numeric_value": "valuenum"}}},
     r"hosp/admissions\.a\.numeric_value: expected \$<column>"),
    ({"hosp/admissions": {"_table": {"join": {"hosp/x": {"key": "k"}}}, "a": {"code": "X", "time": None}}},
     r"_table\.join\.hosp/x"),
    ({"Admissions Table": {"a": {"code": "X", "time": None}}}, "a table name is e.g. hosp/admissions"),
])
def test_what_the_subset_does_not_read_is_refused_naming_the_table_event_and_field(config, message):
    with pytest.raises(ValidationError, match=message):
        parse_event_config(config)


def test_a_missing_table_file_is_named(tmp_path):
    config = parse_event_config({"hosp/admissions": {"a": {"code": "X", "time": None}}})
    with pytest.raises(MissingInputError, match=r"hosp/admissions\.csv\.gz: the event configuration reads table"):
        convert(config, csv_relation(tmp_path))


def test_the_script_writes_meds_data_checked_against_the_schema(data, tmp_path, capsys):
    config = tmp_path / "event_config.yaml"
    config.write_text(yaml.safe_dump({"hosp/patients": {"gender": {"code": 'f"GENDER//{$gender}"', "time": None}}}))
    assert main([str(config), str(data), str(tmp_path / "out")]) == 0
    assert "2 events of 2 subjects" in capsys.readouterr().out
    import meds
    import pyarrow.parquet as pq
    meds.DataSchema.validate(pq.read_table(tmp_path / "out" / "data" / "0.parquet"))


def test_the_standard_configuration_reads_and_names_every_table_of_the_etl():
    config = load_event_config(Path(__file__).parents[2] / "src/ehrbench/meds/data/mimic_iv_event_config.yaml")
    # the tables of MIMIC_IV_MEDS configs/event_configs.yaml
    assert set(config.table_names) == {
        "hosp/admissions", "hosp/diagnoses_icd", "hosp/drgcodes", "hosp/emar", "hosp/hcpcsevents", "hosp/labevents",
        "hosp/omr", "hosp/patients", "hosp/pharmacy", "hosp/procedures_icd", "hosp/transfers", "icu/icustays",
        "icu/chartevents", "icu/procedureevents", "icu/inputevents", "icu/outputevents"}
