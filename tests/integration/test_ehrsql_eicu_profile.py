"""The ehrsql_eicu profile (EHRSQL eICU database, docs/benchmarks.md#ehrsql-eicu-database) built by real dbt on the
eICU demo:
time window, ages, the cohort size recomputed independently from staging, seeded determinism,
and the EHRSQL-2022 preset."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from ehrbench.profiles import eicu_vars
from ehrbench.sources import release_for
from ehrbench.sources.ingest import ingest_release
from ehrbench.transform import run_dbt
from ehrbench.warehouse import connect

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


@pytest.fixture(scope="module")
def profile_builds(eicu_demo_dir, tmp_path_factory):
    """One warehouse (eICU demo only), the profile built four times; snapshots and facts after each."""
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

    # 1. default parameters (EHR-ChatQA constants, = the project's vars), with the YAML tests
    first = build("build", eicu_vars())
    assert first.count("success") == 25  # 14 intermediate + 11 final tables
    warned = [n.unique_id for n in first.nodes if n.status == "warn"]
    assert len(warned) == 1 and "not_empty_ehrsql_eicu__eicu__vitalperiodic" in warned[0]  # demo: no vitalPeriodic
    results = {"default": snapshot(warehouse), "default_cohort": cohort_sizes(warehouse)}
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        results["default_facts"] = default_facts(con)
    finally:
        con.close()

    # 2. the same seed again: same tables
    build("run", eicu_vars())
    results["default_again"] = snapshot(warehouse)

    # 3. another seed
    build("run", eicu_vars(seed=1))
    results["seed1"] = snapshot(warehouse)
    results["seed1_cohort"] = cohort_sizes(warehouse)

    # 4. EHRSQL-2022 constants
    build("run", eicu_vars("ehrsql2022"))
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        results["ehrsql2022_range"] = time_range(con)
        results["ehrsql2022_years"] = con.execute(
            f"select list(distinct year(unitadmittime) order by year(unitadmittime)) from {SCHEMA}.patient"
        ).fetchone()[0]
    finally:
        con.close()
    return results


def cohort_sizes(warehouse: Path) -> tuple[int, int]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return con.execute(
            f"select (select count(*) from {INTERMEDIATE}.int_ehrsql_eicu__eicu__unit_stays where accepted), "
            f"(select count(*) from {INTERMEDIATE}.int_ehrsql_eicu__eicu__admit_dates)").fetchone()
    finally:
        con.close()


# The documented cohort, recomputed from staging without the profile's intermediate models except the
# seeded admission dates: hospitaladmitsource present, male/female, age ("> 89" = 90) > 10, hospital
# stay below its 95th percentile, no inconsistent offsets at or before the stay in the per-patient
# loop (discharge year, hospital stay, unit stay), admitted no later than current_time.
EXPECTED_COHORT = """
with aged as (
    select *, case when age = '> 89' then 90 else try_cast(age as integer) end as age_years
    from staging_eicu.stg_eicu__patient
),
eligible as (
    select * from aged
    where hospitaladmitsource is not null and lower(gender) in ('male', 'female') and age_years > 10
),
short_stays as (
    select * from eligible
    where hospitaldischargeoffset - hospitaladmitoffset
          < (select quantile_cont(hospitaldischargeoffset - hospitaladmitoffset, 0.95) from eligible)
),
keyed as (
    select *,
        min(patientunitstayid) over (partition by patienthealthsystemstayid) as visit_key,
        coalesce(hospitaladmitoffset <= 0 and unitdischargeoffset > 0
                 and unitdischargeoffset <= hospitaldischargeoffset, false) as consistent
    from short_stays
),
accepted as (
    select * from keyed as s
    where not exists (
        select 1 from keyed as f
        where f.uniquepid = s.uniquepid and not f.consistent
          and [f.hospitaldischargeyear, f.visit_key, f.patientunitstayid]
              <= [s.hospitaldischargeyear, s.visit_key, s.patientunitstayid])
),
ranked as (
    select *, dense_rank() over (partition by uniquepid, hospitaldischargeyear order by visit_key) - 1 as visit_rank
    from accepted
)
select count(*)
from ranked
join int_ehrsql_eicu__eicu.int_ehrsql_eicu__eicu__admit_dates as drawn
  on drawn.uniquepid = lower(ranked.uniquepid)
 and drawn.hospitaldischargeyear = ranked.hospitaldischargeyear
 and drawn.visit_seq = ranked.visit_rank
where drawn.hospitaladmitdate + cast(ranked.hospitaladmittime24 as time)
      - to_minutes(cast(ranked.hospitaladmitoffset as bigint)) <= timestamp '2100-12-31 23:59:00'
"""


def default_facts(con) -> dict:
    facts = {"range": time_range(con), "n_time_columns": len(time_columns(con))}
    facts["patients"] = con.execute(f"select count(*) from {SCHEMA}.patient").fetchone()[0]
    facts["expected_patients"] = con.execute(EXPECTED_COHORT).fetchone()[0]
    facts["min_age"] = con.execute(f"select min(age) from {SCHEMA}.patient").fetchone()[0]
    # stays of patients whose every staged age is "> 89": with time span 0 only first-year stays
    # remain, whose age is the patient's youngest age, i.e. 90
    facts["over_89_ages"] = con.execute(f"""
        select list(distinct p.age)
        from {SCHEMA}.patient as p
        where p.uniquepid in (select lower(uniquepid) from staging_eicu.stg_eicu__patient
                              group by uniquepid having bool_and(age = '> 89'))""").fetchone()[0]
    facts["non_null_discharge_after_now"] = con.execute(
        f"select count(*) from {SCHEMA}.patient where hospitaldischargetime is null "
        f"and hospitaldischargestatus is not null").fetchone()[0]
    facts["upper_case_cells"] = con.execute(
        f"select count(*) from {SCHEMA}.diagnosis where diagnosisname <> lower(diagnosisname)").fetchone()[0]
    return facts


def test_times_lie_between_start_year_and_current_time(profile_builds):
    facts = profile_builds["default_facts"]
    assert facts["n_time_columns"] == 14  # every time column of the EHRSQL eICU schema
    lo, hi = facts["range"]
    assert str(lo) >= "2100-01-01 00:00:00"
    assert str(hi) <= "2100-12-31 23:59:00"


def test_ages_and_text(profile_builds):
    facts = profile_builds["default_facts"]
    assert facts["min_age"] > 10
    assert facts["over_89_ages"] == [90]
    assert facts["upper_case_cells"] == 0
    assert facts["non_null_discharge_after_now"] == 0


def test_cohort_matches_the_documented_filters(profile_builds):
    facts = profile_builds["default_facts"]
    assert facts["patients"] == facts["expected_patients"]
    assert 1000 < facts["patients"] < 2520  # demo: 2,520 staged unit stays


def test_same_seed_gives_identical_tables(profile_builds):
    assert profile_builds["default_again"] == profile_builds["default"]
    assert profile_builds["default"]["patient"][0] > 0 and profile_builds["default"]["cost"][0] > 0


def test_another_seed_moves_dates_not_the_cohort(profile_builds):
    default, seed1 = profile_builds["default"], profile_builds["seed1"]
    assert seed1["patient"][1] != default["patient"][1]  # other dates
    assert seed1["hospital"] == default["hospital"]      # not shifted
    # the shifted cohort before the time window is the same size: one draw per hospital stay
    assert profile_builds["seed1_cohort"] == profile_builds["default_cohort"]
    # in the window, only stays pushed past the year end (or events before Jan 1) may differ
    for table in TABLES:
        assert abs(seed1[table][0] - default[table][0]) <= 0.02 * max(default[table][0], 1), table


def test_ehrsql2022_preset_spans_2100_to_2105(profile_builds):
    lo, hi = profile_builds["ehrsql2022_range"]
    assert str(lo) >= "2100-01-01 00:00:00"
    assert str(hi) <= "2105-12-31 23:59:00"
    years = profile_builds["ehrsql2022_years"]
    assert years[0] == 2100 and years[-1] == 2105 and len(years) == 6
