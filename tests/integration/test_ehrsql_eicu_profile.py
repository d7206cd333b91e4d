"""The ehrsql_eicu profile (EHRSQL (2022)'s eICU database, docs/benchmarks.md#ehrsql-eicu-database) built by real
dbt on the eICU demo and held to the published preprocessing (glee4810/EHRSQL `preprocess/preprocess_db_eicu.py`,
re-derived from the raw files in tests/published_eicu.py): the filters ("> 89" dropped, the 95th-percentile
hospital-stay filter), the time shift, no lower time bound, seeded determinism, and with the `ehrsql2022` preset
(EHRSQL's README command) the patient sample, the de-identifying shuffle and the costs that continue the generator."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from ehrbench.profiles import eicu_vars
from ehrbench.sources import release_for
from ehrbench.sources.ingest import ingest_release
from ehrbench.transform import run_dbt
from ehrbench.warehouse import connect
from tests.published_eicu import (
    admitted_by,
    deidentified,
    event_time,
    published_cohort,
    published_paths,
    published_time_shift,
    read_raw,
)

pytestmark = pytest.mark.integration

SCHEMA = "ehrsql_eicu__eicu"
INTERMEDIATE = "int_ehrsql_eicu__eicu"
TABLES = ("patient", "diagnosis", "treatment", "lab", "medication", "cost", "allergy", "intakeoutput",
          "microlab", "vitalperiodic", "hospital")


def snapshot(warehouse: Path) -> dict[str, tuple[int, str]]:
    """(row count, content hash) per final table."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return {table: con.execute(
            f"select count(*), md5(coalesce(string_agg(cast(t as varchar), '|' order by cast(t as varchar)), '')) "
            f"from {SCHEMA}.{table} as t").fetchone() for table in TABLES}
    finally:
        con.close()


def time_columns(con) -> list[tuple[str, str]]:
    return con.execute(
        "select table_name, column_name from information_schema.columns "
        "where table_schema = ? and data_type like 'TIMESTAMP%' order by all", [SCHEMA]).fetchall()


def time_range(con) -> tuple:
    parts = " union all ".join(f"select min({c}) as lo, max({c}) as hi from {SCHEMA}.{t}" for t, c in time_columns(con))
    return con.execute(f"select min(lo), max(hi) from ({parts})").fetchone()


def rows_of(warehouse: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def profile_builds(eicu_demo_dir, tmp_path_factory):
    """One warehouse (eICU demo only), the profile built three times; snapshots and facts after each. (Equal
    seeds give equal tables: the first build equals the published code's re-derivation, which is deterministic.)"""
    root = tmp_path_factory.mktemp("ehrsql_eicu")
    warehouse = root / "warehouse.duckdb"
    with connect(warehouse) as con:
        ingest_release(con, release_for("eicu"), eicu_demo_dir, origin="local")

    def build(command: str, vars: dict):
        run = run_dbt([command, "--select", "models/ehrsql_eicu"], warehouse=warehouse, work_dir=root / "dbt",
                      vars=vars)
        assert run.count("error") == 0 and run.count("fail") == 0
        return run

    # Every invocation with the same vars reuses dbt's partial parse (a vars change forces a re-parse).
    run_dbt(["run", "--select", "models/staging/eicu"], warehouse=warehouse, work_dir=root / "dbt",
            vars=eicu_vars())

    # 1. default parameters (EHR-ChatQA constants, = the project's vars: every patient, no shuffle), YAML tests
    first = build("build", eicu_vars())
    assert first.count("success") == 27  # 16 intermediate + 11 final tables: the shuffle's 8 models are disabled
    warned = [n.unique_id for n in first.nodes if n.status == "warn"]
    assert len(warned) == 1 and "not_empty_ehrsql_eicu__eicu__vitalperiodic" in warned[0]  # demo: no vitalPeriodic
    results = {"default": snapshot(warehouse), "default_cohort": cohort_sizes(warehouse)}
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        results["default_facts"] = default_facts(con)
    finally:
        con.close()

    # 2. another seed
    build("run", eicu_vars(seed=1))
    results["seed1"] = snapshot(warehouse)
    results["seed1_cohort"] = cohort_sizes(warehouse)

    # 3. EHRSQL (2022)'s own settings, with the YAML tests
    second = build("build", eicu_vars("ehrsql2022"))
    assert second.count("success") == 35
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        results["ehrsql2022_range"] = time_range(con)
        results["ehrsql2022_years"] = con.execute(
            f"select list(distinct year(unitadmittime) order by year(unitadmittime)) from {SCHEMA}.patient"
        ).fetchone()[0]
        results["ehrsql2022"] = {
            "patient": con.execute(f"select patientunitstayid, unitadmittime, age, hospitaldischargetime "
                                   f"from {SCHEMA}.patient").fetchall(),
            "diagnosis": con.execute(f"select diagnosisid, patientunitstayid, diagnosisname, icd9code, diagnosistime "
                                     f"from {SCHEMA}.diagnosis order by diagnosisid").fetchall(),
            "medication": con.execute(f"select medicationid, patientunitstayid, drugname, dosage, routeadmin, "
                                      f"drugstarttime, drugstoptime from {SCHEMA}.medication "
                                      f"order by medicationid").fetchall(),
            "cost": con.execute(f"""
                select c.eventtype, coalesce(d.diagnosisname, l.labname, t.treatmentname, m.drugname), c.cost
                from {SCHEMA}.cost as c
                left join {SCHEMA}.diagnosis as d on c.eventtype = 'diagnosis' and d.diagnosisid = c.eventid
                left join {SCHEMA}.lab as l on c.eventtype = 'lab' and l.labid = c.eventid
                left join {SCHEMA}.treatment as t on c.eventtype = 'treatment' and t.treatmentid = c.eventid
                left join {SCHEMA}.medication as m on c.eventtype = 'medication' and m.medicationid = c.eventid
                """).fetchall(),
            "event_names": {table: [name for (name,) in con.execute(
                f"select {column} from {SCHEMA}.{table} group by {column} order by min({table}id)").fetchall()]
                for table, column in (("lab", "labname"), ("treatment", "treatmentname"))},
        }
    finally:
        con.close()
    return results


def cohort_sizes(warehouse: Path) -> tuple[int, int]:
    return rows_of(warehouse,
                   f"select (select count(*) from {INTERMEDIATE}.int_ehrsql_eicu__eicu__unit_stays where accepted), "
                   f"(select count(*) from {INTERMEDIATE}.int_ehrsql_eicu__eicu__admit_dates)")[0]


def default_facts(con) -> dict:
    facts = {"range": time_range(con), "n_time_columns": len(time_columns(con))}
    facts["stays"] = {unit: (admit, age) for unit, admit, age in con.execute(
        f"select patientunitstayid, unitadmittime, age from {SCHEMA}.patient").fetchall()}
    facts["min_age"] = con.execute(f"select min(age) from {SCHEMA}.patient").fetchone()[0]
    facts["over_89_patients"] = con.execute(f"""
        select count(*)
        from {SCHEMA}.patient as p
        where p.uniquepid in (select lower(uniquepid) from staging_eicu.stg_eicu__patient where age = '> 89')
        """).fetchone()[0]
    facts["non_null_discharge_after_now"] = con.execute(
        f"select count(*) from {SCHEMA}.patient where hospitaldischargetime is null "
        f"and hospitaldischargestatus is not null").fetchone()[0]
    facts["upper_case_cells"] = con.execute(
        f"select count(*) from {SCHEMA}.diagnosis where diagnosisname <> lower(diagnosisname)").fetchone()[0]
    facts["intakeoutput_before_start"] = con.execute(
        f"select count(*) from {SCHEMA}.intakeoutput where intakeoutputtime < '2100-01-01'").fetchone()[0]
    return facts


def published_stays(demo_dir: Path, params: dict) -> tuple:
    """The published loop with EHRSQL (2022)'s filters and `params`' time shift: (generator, stays admitted by now)."""
    rng, stays = published_time_shift(read_raw(demo_dir, "patient.csv.gz"), seed=params["seed"],
                                      start_year=params["start_year"], time_span=params["time_span"],
                                      age_over_89=None, hospital_stay_percentile=95)
    return rng, admitted_by(stays, datetime.strptime(params["current_time"], "%Y-%m-%d %H:%M:%S"))


@pytest.fixture(scope="module")
def published_2022(profile_builds, eicu_demo_dir) -> dict:
    """EHRSQL (2022)'s preprocessing with its README's settings, re-derived: the stays, the sample, the generator
    after the sample."""
    params = eicu_vars("ehrsql2022")["ehrsql_eicu"]
    rng, stays = published_stays(eicu_demo_dir, params)
    cohort = published_cohort(rng, stays, num_patient=params["num_patients"],
                              cur_patient_ratio=params["current_ratio"])
    return {"rng": rng, "stays": cohort, "all_stays": stays,
            "now": datetime.strptime(params["current_time"], "%Y-%m-%d %H:%M:%S"),
            "stays_in_patient_csv": {int(r["patientunitstayid"])
                                     for r in read_raw(eicu_demo_dir, "patient.csv.gz")}}


# --- EHRSQL (2022)'s rules, with the default (EHR-ChatQA) time shift: every patient, no shuffle -------------------

def test_times_up_to_the_current_time_with_no_lower_bound(profile_builds):
    facts = profile_builds["default_facts"]
    assert facts["n_time_columns"] == 14  # every time column of the EHRSQL eICU schema
    _, hi = facts["range"]
    assert str(hi) <= "2100-12-31 23:59:00"
    assert facts["intakeoutput_before_start"] > 0  # adjust_time only compares with the current time


def test_every_stay_has_the_published_time_and_age(profile_builds, eicu_demo_dir):
    """No sample with num_patients None: exactly the stays the published loop times and admits by now (filters
    with "> 89" dropped and the 95th-percentile hospital stay), with its unit admit time and age."""
    _, stays = published_stays(eicu_demo_dir, eicu_vars()["ehrsql_eicu"])
    expected = {unit: (row["unitadmittime"], row["age"]) for unit, row in stays.items()}
    assert profile_builds["default_facts"]["stays"] == expected
    assert 1000 < len(expected) < 2520  # demo: 2,520 staged unit stays


def test_ages_and_text(profile_builds):
    facts = profile_builds["default_facts"]
    assert facts["min_age"] > 10
    assert facts["over_89_patients"] == 0  # dropped, not read as 90 (EHR-ChatQA's database keeps them)
    assert facts["upper_case_cells"] == 0
    assert facts["non_null_discharge_after_now"] == 0


def test_another_seed_moves_dates_not_the_cohort(profile_builds):
    default, seed1 = profile_builds["default"], profile_builds["seed1"]
    assert default["patient"][0] > 0 and default["cost"][0] > 0
    assert seed1["patient"][1] != default["patient"][1]  # other dates
    assert seed1["hospital"] == default["hospital"]      # not shifted
    # the shifted cohort before the time window is the same size: one draw per hospital stay
    assert profile_builds["seed1_cohort"] == profile_builds["default_cohort"]
    # only stays pushed past the year end may differ
    for table in TABLES:
        assert abs(seed1[table][0] - default[table][0]) <= 0.02 * max(default[table][0], 1), table


# --- the ehrsql2022 preset: 2100-2105, 1,000 patients (10 % current), de-identified ---------------------------------

def test_ehrsql2022_preset_spans_2100_to_2105(profile_builds):
    _, hi = profile_builds["ehrsql2022_range"]
    assert str(hi) <= "2105-12-31 23:59:00"
    years = profile_builds["ehrsql2022_years"]
    assert years[0] == 2100 and years[-1] == 2105 and len(years) == 6


def test_ehrsql2022_patients_are_the_published_sample(profile_builds, published_2022):
    """rng.choice of int(1000 * 0.1) current patients (the demo has fewer: taken whole, nothing drawn), then 900 of
    the others, continuing the time shift's generator; every stay of a sampled patient, with its time and age."""
    expected = {unit: (row["unitadmittime"], row["age"], row["hospitaldischargetime"])
                for unit, row in published_2022["stays"].items()}
    built = {unit: (admit, age, discharge) for unit, admit, age, discharge in profile_builds["ehrsql2022"]["patient"]}
    assert built == expected
    patients = {row["uniquepid"] for row in published_2022["stays"].values()}
    current = {row["uniquepid"] for row in published_2022["all_stays"].values() if row["hospitaldischargetime"] is None}
    assert 0 < len(current) < 100 and current <= patients and len(patients) == len(current) + 900


def test_ehrsql2022_diagnoses_are_shuffled_as_published(profile_builds, published_2022, eicu_demo_dir):
    """The path rule, then condition_value_shuffler on (diagnosisname, icd9code) over the table merged with
    patient.csv (grouped by unit stay), then the sample and the times; ids renumbered in that order."""
    raw = read_raw(eicu_demo_dir, "diagnosis.csv.gz")
    kept, _ = published_paths(raw, "diagnosisstring", "diagnosisid")
    named = []
    for row in raw:
        parts = row["diagnosisstring"].split("|")
        if "|".join(parts[:2] + parts[2:4]) in kept:
            named.append(row | {"diagnosisname": " - ".join(parts[2:4])})
    shuffled = deidentified(named, ["diagnosisname", "icd9code"], published_2022["stays_in_patient_csv"])
    expected = []
    for row in shuffled:
        moment = event_time(published_2022["stays"], row["patientunitstayid"], row["diagnosisoffset"],
                            published_2022["now"])
        if moment is not None:
            expected.append((len(expected), int(row["patientunitstayid"]), row["diagnosisname"], row["icd9code"],
                             moment))
    assert profile_builds["ehrsql2022"]["diagnosis"] == expected
    # the shuffle moved names between stays: most rows no longer carry their own
    own = {(int(r["patientunitstayid"]), r["diagnosisoffset"], r["diagnosisname"]) for r in named}
    assert sum((u, r["diagnosisoffset"], r["diagnosisname"]) in own
               for u, r in ((int(r["patientunitstayid"]), r) for r in shuffled)) < 0.5 * len(shuffled)


def test_ehrsql2022_medications_are_shuffled_as_published(profile_builds, published_2022, eicu_demo_dir):
    """drugname, dosage and routeadmin present and the order not cancelled; the three shuffled together; the start
    time required, the stop time NULL after now."""
    raw = [row for row in read_raw(eicu_demo_dir, "medication.csv.gz")
           if row["drugname"] and row["dosage"] and row["routeadmin"] and row["drugordercancelled"] == "no"]
    shuffled = deidentified(raw, ["drugname", "dosage", "routeadmin"], published_2022["stays_in_patient_csv"])
    expected = []
    for row in shuffled:
        stays, unit, now = published_2022["stays"], row["patientunitstayid"], published_2022["now"]
        start = event_time(stays, unit, row["drugstartoffset"], now)
        if start is not None:
            expected.append((len(expected), int(unit), row["drugname"], row["dosage"], row["routeadmin"], start,
                             event_time(stays, unit, row["drugstopoffset"], now)))
    assert profile_builds["ehrsql2022"]["medication"] == expected


def test_ehrsql2022_costs_continue_the_sample_generator(profile_builds, published_2022):
    """After the sample the same generator draws poisson(10, size=4), then one round(normal(mean, 1), 2) per name
    in order of first appearance: diagnoses and labs mean[0], treatments mean[2], drugs mean[3]."""
    rng = published_2022["rng"]
    built = profile_builds["ehrsql2022"]
    means = rng.poisson(lam=10, size=4)
    names = {"diagnosis": list(dict.fromkeys(name for _, _, name, _, _ in built["diagnosis"])),
             "lab": built["event_names"]["lab"], "treatment": built["event_names"]["treatment"],
             "medication": list(dict.fromkeys(row[2] for row in built["medication"]))}
    expected = {}
    for eventtype, mean in (("diagnosis", means[0]), ("lab", means[0]), ("treatment", means[2]),
                            ("medication", means[3])):
        expected |= {(eventtype, name): float(round(rng.normal(loc=mean, scale=1.0), 2)) for name in names[eventtype]}
    assert {(eventtype, name): cost for eventtype, name, cost in built["cost"]} == expected
