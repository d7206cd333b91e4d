"""EHR-ChatQA's eICU database (profile `renamed`, database `eicu`, docs/benchmarks.md#ehr-chatqa-eicu-database) built
by real dbt on the eICU demo and held to the published preprocessing: glee4810/EHRSQL `preprocess/preprocess_db_eicu.py`
and `preprocess/preprocess_utils.py` (Build_eICU, Sampler, adjust_time) run with EHR-ChatQA's settings (start year
2100, span 0, current time 2100-12-31 23:59:00, every patient, no hospital-stay percentile filter, ages "> 89" read
as 90). The expected values are re-derived here from the raw CSV files by the published rules (the patient loop, the
numpy draws, the path rule, the cost draws), independently of the dbt models.

The last test runs EHR-ChatQA's published eICU tasks (glee4810/EHR-ChatQA `src/envs/eicu_star/eval_{incre,adapt}.jsonl`,
gold SQL and gold answers) when they are found under the shared data folder (`ehr-chatqa/eicu_star/`), and reports the
share of gold answers the database reproduces, by the tables a question reads."""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from datetime import datetime

import duckdb
import numpy as np
import pytest
import sqlglot
from sqlglot import exp

from ehrbench.export import export_benchmark_database
from ehrbench.layout import BuildLayout
from ehrbench.profiles import BenchmarkDatabase, profile_vars, schema_renames
from ehrbench.sources import release_for
from ehrbench.sources.ingest import ingest_release
from ehrbench.transform import run_dbt
from ehrbench.warehouse import connect
from tests.conftest import SHARED_DATA
from tests.published_eicu import admitted_by, published_paths, published_time_shift, read_raw
from tests.published_eicu import event_time as published_event_time

pytestmark = pytest.mark.integration

DATABASE = BenchmarkDatabase("renamed", "eicu")
SCHEMA = DATABASE.schema
VARS = profile_vars(seed=0)  # the default eICU preset: EHR-ChatQA's time shift
SHIFT = VARS["ehrsql_eicu"]
NOW = datetime.strptime(SHIFT["current_time"], "%Y-%m-%d %H:%M:%S")
TASKS = SHARED_DATA / "ehr-chatqa" / "eicu_star"

# renamed table -> (raw file, raw id column)
EVENT_FILES = {
    "condition": ("diagnosis.csv.gz", "diagnosisid"),
    "treatment": ("treatment.csv.gz", "treatmentid"),
    "lab": ("lab.csv.gz", "labid"),
    "prescription": ("medication.csv.gz", "medicationid"),
    "allergy_reaction": ("allergy.csv.gz", "allergyid"),
    "fluid_balance": ("intakeOutput.csv.gz", "intakeoutputid"),
    "microbiology": ("microLab.csv.gz", "microlabid"),
}


@pytest.fixture(scope="module")
def built(eicu_demo_dir, tmp_path_factory) -> dict:
    """One warehouse with the eICU demo and the renamed eICU database (models and their YAML tests), exported as a
    build exports it."""
    root = tmp_path_factory.mktemp("ehrchatqa_eicu")
    warehouse = root / "warehouse.duckdb"
    with connect(warehouse) as con:
        ingest_release(con, release_for("eicu"), eicu_demo_dir, origin="local")
    run = run_dbt(["build", "--select", "staging.eicu", "ehrchatqa_rename_map", "models/renamed/eicu",
                   "lineage__renamed__eicu"], warehouse=warehouse, work_dir=root / "dbt", vars=VARS)
    assert run.count("error") == 0 and run.count("fail") == 0, run.summary
    export_benchmark_database(warehouse, BuildLayout(root / "build"), DATABASE,
                              schema_renames(VARS["ehrsql2024"]["seed"])[DATABASE.key])
    duckdb_file, sqlite_file = DATABASE.files(root / "build")
    return {"warehouse": warehouse, "sqlite": sqlite_file, "duckdb": duckdb_file, "demo": eicu_demo_dir}


def _query(built: dict, sql: str, params: list | None = None) -> list[tuple]:
    con = duckdb.connect(str(built["warehouse"]), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def _sqlite(built: dict, sql: str) -> list[tuple]:
    con = sqlite3.connect(built["sqlite"])
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def published(built) -> dict:
    """The published time shift on the demo's patient.csv, and the stays it keeps (admitted up to the current time)."""
    rng, stays = published_time_shift(read_raw(built["demo"], "patient.csv.gz"), seed=SHIFT["seed"],
                                      start_year=SHIFT["start_year"], time_span=SHIFT["time_span"], age_over_89=90,
                                      hospital_stay_percentile=None)
    return {"rng": rng, "stays": admitted_by(stays, NOW)}


def event_time(stays: dict, unit: str | None, offset: str | None) -> datetime | None:
    return published_event_time(stays, unit, offset, NOW)


def lineage(built: dict, table: str) -> list[tuple[int, int, int]]:
    """(row_id, source_row, raw id) of a renamed table's rows, in row_id order."""
    return [(row_id, source_row, int(next(iter(json.loads(key).values())))) for row_id, source_row, key in _query(
        built, "select row_id, source_row, source_key from lineage.renamed__eicu where table_name = ? order by row_id",
        [table])]


# --- the stays ------------------------------------------------------------------------------------------------------

def test_every_patient_is_kept_with_the_published_dates_and_ages(built, published):
    """No cohort sample and no hospital-stay percentile filter: every stay the published loop times and admits by
    the current time is there, with the published unit admit time (first-year choice and stratified date draws of
    one default_rng(0)) and age; '> 89' reads as 90."""
    rows = {unit: (admit, age) for unit, admit, age in _query(
        built, f"select unit_id, unit_admit_time, age from {SCHEMA}.icupatient")}
    expected = {unit: (row["unitadmittime"], row["age"]) for unit, row in published["stays"].items()}
    assert set(rows) == set(expected)
    assert rows == expected
    assert len({row["uniquepid"] for row in published["stays"].values()}) == _query(
        built, f"select count(distinct patient_id) from {SCHEMA}.icupatient")[0][0]
    assert any(row["age"] >= 90 for row in published["stays"].values())  # "> 89" stays are kept (as 90)


def test_no_hospital_stay_percentile_filter(built, published):
    """EHRSQL (2022) drops stays at or above the 95th percentile of the hospital stay; EHR-ChatQA keeps them."""
    lengths = {unit: row["offsets"][2] - row["offsets"][0] for unit, row in published["stays"].items()}
    threshold = np.percentile(list(lengths.values()), q=95)
    long_stays = {unit for unit, length in lengths.items() if length >= threshold}
    units = {unit for (unit,) in _query(built, f"select unit_id from {SCHEMA}.icupatient")}
    assert long_stays and long_stays <= units


def test_discharges_after_now_are_current_stays(built):
    rows = _query(built, f"select count(*) filter (where hospital_discharge_time is null), "
                         f"count(*) filter (where hospital_discharge_time is null "
                         f"and (hospital_discharge_status is not null or weight_discharge is not null)), "
                         f"max(hospital_discharge_time) from {SCHEMA}.icupatient")
    current, not_blanked, latest = rows[0]
    assert current > 0 and not_blanked == 0 and latest <= NOW


# --- the events -----------------------------------------------------------------------------------------------------

def test_renumbered_ids_follow_the_file_row_order(built):
    """Each event table is renumbered 0..n-1 in its CSV file's row order (not eICU id order); the lineage's
    source_row is the raw file row of the id it names."""
    for table, (file_name, id_column) in EVENT_FILES.items():
        position = {int(row[id_column]): index + 1 for index, row in enumerate(read_raw(built["demo"], file_name))}
        rows = lineage(built, table)
        assert [row_id for row_id, _, _ in rows] == list(range(len(rows))), table
        assert all(position[raw_id] == source_row for _, source_row, raw_id in rows), table
        assert all(a[1] < b[1] for a, b in zip(rows, rows[1:], strict=False)), table
    diagnosis_ids = [int(row["diagnosisid"]) for row in read_raw(built["demo"], "diagnosis.csv.gz")]
    assert diagnosis_ids != sorted(diagnosis_ids)  # the demo's file order is not its id order


@pytest.mark.parametrize(("table", "file_name", "id_column", "column", "offset", "name_column"), [
    ("condition", "diagnosis.csv.gz", "diagnosisid", "diagnosisstring", "diagnosisoffset", "condition_name"),
    ("treatment", "treatment.csv.gz", "treatmentid", "treatmentstring", "treatmentoffset", "treatment_name"),
])
def test_most_common_path_and_its_ties_follow_the_file(built, published, table, file_name, id_column, column, offset,
                                                       name_column):
    raw = read_raw(built["demo"], file_name)
    kept, ties = published_paths(raw, column, id_column)
    assert ties[True] > 0  # the demo has ties that file order and id order decide differently
    expected = {}
    for row in raw:
        parts = row[column].split("|")
        if "|".join(parts[:2] + parts[2:4]) in kept and event_time(published["stays"], row["patientunitstayid"],
                                                                    row[offset]):
            expected[int(row[id_column])] = " - ".join(parts[2:4])
    names = dict(_query(built, f"select {table}_id, {name_column} from {SCHEMA}.{table}"))
    assert {raw_id: names[row_id] for row_id, _, raw_id in lineage(built, table)} == expected


def test_events_keep_times_before_the_start_year_and_drop_those_after_now(built, published):
    """adjust_time only compares with the current time: intake/output rows before 2100-01-01 stay (2 on the demo),
    rows after the current time go. The kept rows are exactly the published label rule's."""
    raw = read_raw(built["demo"], "intakeOutput.csv.gz")
    volume_labels = {row["celllabel"] for row in raw
                     if "intake (ml)" in row["cellpath"] or "output (ml)" in row["cellpath"]}
    expected = {int(row["intakeoutputid"]) for row in raw
                if row["celllabel"] in volume_labels and row["celllabel"] not in ("intake", "output")
                and event_time(published["stays"], row["patientunitstayid"], row["intakeoutputoffset"])}
    assert {raw_id for _, _, raw_id in lineage(built, "fluid_balance")} == expected
    start = f"{SHIFT['start_year']}-01-01"
    before, after = _query(built, f"select count(*) filter (where fluid_balance_time < '{start}'), count(*) filter "
                                  f"(where fluid_balance_time > '{NOW}') from {SCHEMA}.fluid_balance")[0]
    assert before > 0 and after == 0


# --- the cost -------------------------------------------------------------------------------------------------------

def test_costs_continue_the_time_shift_generator(built, published):
    """After the date draws the same generator draws rng.poisson(10, size=4), then one round(normal(mean, 1), 2)
    per name in order of first appearance: conditions and labs with mean[0], treatments mean[2], drugs mean[3]."""
    rng = published["rng"]
    means = rng.poisson(lam=10, size=4)
    expected = {}
    for event_type, name_column, mean in (("condition", "condition_name", means[0]), ("lab", "lab_name", means[0]),
                                          ("treatment", "treatment_name", means[2]),
                                          ("prescription", "drug_name", means[3])):
        names = [name for (name,) in _query(built, f"select {name_column} from {SCHEMA}.{event_type} "
                                                   f"group by {name_column} order by min({event_type}_id)")]
        expected |= {(event_type, name): round(float(rng.normal(loc=mean, scale=1.0)), 2) for name in names}
    charged = _query(built, f"""
        select c.cost_id, c.event_type, c.event_id, c.cost_amount, c.unit_id, c.hosp_id = p.hosp_id,
               coalesce(d.condition_name, l.lab_name, t.treatment_name, m.drug_name)
        from {SCHEMA}.cost as c
        join {SCHEMA}.icupatient as p on p.unit_id = c.unit_id
        left join {SCHEMA}.condition as d on c.event_type = 'condition' and d.condition_id = c.event_id
        left join {SCHEMA}.lab as l on c.event_type = 'lab' and l.lab_id = c.event_id
        left join {SCHEMA}.treatment as t on c.event_type = 'treatment' and t.treatment_id = c.event_id
        left join {SCHEMA}.prescription as m on c.event_type = 'prescription' and m.prescription_id = c.event_id
        order by c.cost_id""")
    events = sum(_query(built, f"select count(*) from {SCHEMA}.{table}")[0][0]
                 for table in ("condition", "lab", "treatment", "prescription"))
    assert len(charged) == events  # one charge per event
    assert all(same_hosp for *_, same_hosp, _ in charged)
    assert {(event_type, name): amount for _, event_type, _, amount, _, _, name in charged} == expected
    blocks = ["condition", "lab", "treatment", "prescription"]
    order = [(blocks.index(event_type), event_id) for _, event_type, event_id, *_ in charged]
    assert order == sorted(order) and [row[0] for row in charged] == list(range(len(charged)))


# --- the SQLite file ------------------------------------------------------------------------------------------------

def test_sqlite_stores_whole_numbers_as_integers_and_age_as_text(built):
    """NUMERIC affinity (whole numbers are integers, others reals) and a text `age` in SQLite; the DuckDB file keeps
    `age` an integer, so that its numeric comparisons work there too."""
    assert dict(_sqlite(built, "select typeof(lab_result), count(*) > 0 from lab group by 1")) == {
        "integer": 1, "real": 1}
    assert _sqlite(built, "select lab_result from lab where lab_result = 11 limit 1") == [(11,)]
    assert _sqlite(built, "select distinct typeof(age) from icupatient") == [("text",)]
    assert ("age", "TEXT") in [(row[1], row[2]) for row in _sqlite(built, "pragma table_info(icupatient)")]
    con = duckdb.connect(str(built["duckdb"]), read_only=True)
    try:
        over_65 = con.execute("select count(*) from icupatient where age >= 65").fetchone()[0]
    finally:
        con.close()
    assert over_65 == _sqlite(built, "select count(*) from icupatient where cast(age as integer) >= 65")[0][0] > 0


def test_hospital_table_and_event_types(built):
    raw = read_raw(built["demo"], "hospital.csv.gz")
    rows = _sqlite(built, "select hospital_id, bed_capacity_category, region from hospital order by hospital_id")
    assert rows == sorted((int(r["hospitalid"]), r["numbedscategory"], r["region"]) for r in raw)
    assert {t for (t,) in _sqlite(built, "select distinct event_type from cost")} == {
        "condition", "lab", "treatment", "prescription"}


# --- EHR-ChatQA's published eICU tasks ------------------------------------------------------------------------------

def _task_file(kind: str) -> list[dict]:
    text = (TASKS / f"eval_{kind}.jsonl").read_text()
    try:
        return json.loads(text)  # the published files hold one JSON list
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def _cell(value) -> str:
    """src/utils.py process_item: numbers rounded to 4 decimals, everything as a string."""
    try:
        return str(round(float(value), 4))
    except (TypeError, ValueError):
        return str(value)


def _rows(rows) -> list[list[str]]:
    """src/utils.py process_result: cells as strings, rows sorted, the first 100."""
    return sorted([[_cell(c) for c in row] for row in rows])[:100]


_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
         "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def _words(n: int) -> str:
    """A count as AdaptQA's gold writes it ('two hundred and forty-seven')."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + (f"-{_ONES[n % 10]}" if n % 10 else "")
    return f"{_ONES[n // 100]} hundred" + (f" and {_words(n % 100)}" if n % 100 else "")


def reproduces(task: dict, rows: list[tuple]) -> bool:
    """EHR-ChatQA's environment (src/envs/base.py): IncreQA — some column of the result holds exactly the set of
    the gold's values (NULLs aside); AdaptQA — the answer holds the gold values, a count being written in words."""
    gold = sorted({row[0] for row in _rows(task["gold_answer"])})
    got = _rows(rows)
    if task["task_type"] == "adapt":
        worded = all(not value.replace(".", "", 1).lstrip("-").isdigit() for value in gold)
        values = {_words(int(float(cell))) if worded and cell.replace(".", "", 1).isdigit() else cell
                  for row in got for cell in row}
        return sorted(values - {"None"}) == gold
    return any(sorted(set(column) - {"None"}) == gold for column in zip(*got, strict=True)) if got else False


def tables_read(sql: str) -> set[str]:
    tree = sqlglot.parse_one(sql, read="sqlite")
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    return {table.name.lower() for table in tree.find_all(exp.Table)} - ctes


def test_published_eicu_tasks_reproduce(built):
    """Every gold SQL of EHR-ChatQA's eICU tasks on the demo build, compared as EHR-ChatQA compares answers.
    Questions reading vital_signs (the demo has no vitalPeriodic), lab (a subset of the demo's lab table) or cost
    (its lab charges, and the draws of the treatment and drug costs, which come after one draw per lab name) cannot
    reproduce here and are only counted; every other one must."""
    if not all((TASKS / f"eval_{kind}.jsonl").is_file() for kind in ("incre", "adapt")):
        pytest.skip(f"EHR-ChatQA's eICU task files not found in {TASKS} (eval_incre.jsonl, eval_adapt.jsonl of "
                    "glee4810/EHR-ChatQA src/envs/eicu_star/)")
    con = sqlite3.connect(f"file:{built['sqlite']}?immutable=1", uri=True)
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    failed = []
    try:
        for kind in ("incre", "adapt"):
            for task in _task_file(kind):
                tables = tables_read(task["gold_sql"])
                group = ("vital_signs" if "vital_signs" in tables else "lab or cost" if tables & {"lab", "cost"}
                         else "other tables")
                try:
                    ok = reproduces(task, con.execute(task["gold_sql"]).fetchall())
                except sqlite3.Error:
                    ok = False
                tally[group][0] += ok
                tally[group][1] += 1
                if not ok and group == "other tables":
                    failed.append(f"{kind} {task['task_id']}")
    finally:
        con.close()
    matched, total = sum(m for m, _ in tally.values()), sum(n for _, n in tally.values())
    print(f"\nEHR-ChatQA eICU gold answers reproduced on renamed/eicu (demo): {matched}/{total} "
          f"({matched / total:.1%}); " + ", ".join(f"{group} {m}/{n}" for group, (m, n) in sorted(tally.items())))
    assert total == 181  # 141 IncreQA + 40 AdaptQA tasks
    assert not failed, failed
