"""FHIR ids as MIMIC-IV on FHIR makes them (docs/benchmarks.md#fhir-resource-ids), in Python and in the SQL of the dbt
macro."""

from __future__ import annotations

import random
import re
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import jinja2
import pytest

from ehrbench.fhir.ids import ORGANIZATION_KEY, RESOURCE_KEYS, key_of, medication_key, namespace, resource_id

MACRO_FILE = Path(__file__).resolve().parents[2] / "dbt_project" / "macros" / "fhir_ids.sql"


def test_ids_published_by_fhir_agentbench():
    # docs/benchmarks.md#fhir-resource-ids: verified against published FHIR-AgentBench ids
    assert resource_id("Patient", 10009628) == "51d2190c-cc46-56c5-b2ea-363895cbea75"
    assert resource_id("ObservationLabevents", 222161) == "a8407c1c-7737-5d0a-9209-168158821204"
    # patient 10018328's first visit: diagnosis seq_num 9, ICD-10 E780 (demo hosp/diagnoses_icd.csv.gz)
    assert resource_id("Condition", key_of(26706939, 9, "E780")) == "bcc812bc-a287-5a91-8857-8d0c5dd93fbe"
    # MIMIC-IV on FHIR's Organization, the managingOrganization of its published Patients
    assert resource_id("Organization", ORGANIZATION_KEY) == "ee172322-118b-5716-abbc-18e4c5437e15"


def test_one_id_per_resource_kind_by_hand():
    """Each namespace computed step by step with the uuid module, independently of ehrbench.fhir.ids."""
    root = uuid.uuid5(uuid.NAMESPACE_OID, "MIMIC-IV")
    for name in RESOURCE_KEYS:
        expected = uuid.uuid5(uuid.uuid5(root, name), "12345")
        assert resource_id(name, "12345") == str(expected) and expected.version == 5
    assert len({resource_id(name, "1") for name in RESOURCE_KEYS}) == len(RESOURCE_KEYS)


def test_keys_and_bad_input():
    assert key_of(30000001, "2180-07-23 14:00:00", 220045, "97") == "30000001-2180-07-23 14:00:00-220045-97"
    assert medication_key("Heparin", "HEPA5I", "63323026201") == "Heparin--HEPA5I--63323026201"
    assert medication_key("Heparin", None, "904224461") == "Heparin--00904224461"
    assert medication_key("Heparin") == "Heparin"
    assert medication_key("Heparin", "HEPA5I", "0") == "Heparin--HEPA5I"  # 0 = no NDC in MIMIC-IV
    with pytest.raises(ValueError, match="missing"):
        key_of(1, None)
    with pytest.raises(ValueError, match="unknown FHIR id namespace 'Observation'"):
        namespace("Observation")


def _macro():
    return jinja2.Environment().from_string(MACRO_FILE.read_text()).module.fhir_id


def test_macro_namespaces_are_the_computed_ones():
    constants = dict(re.findall(r"'(\w+)': '([0-9a-f]{32})'", MACRO_FILE.read_text()))
    assert constants == {name: namespace(name).hex for name in RESOURCE_KEYS}


def test_sql_ids_equal_python_ids_for_random_keys():
    rng = random.Random(0)
    keys = [str(rng.randrange(10**9)) for _ in range(500)] + ["", "É-ü ∑", "a" * 300, "10009628"]
    con = duckdb.connect()
    con.execute("create table k as select unnest(?::varchar[]) as key", [keys])
    fhir_id = _macro()
    for name in ("Patient", "ObservationLabevents", "Condition"):
        rows = con.execute(f"select key, {fhir_id(name, 'key')} from k").fetchall()
        assert {key: got for key, got in rows} == {key: resource_id(name, key) for key in keys}
    assert con.execute(f"select {fhir_id('Patient', '10009628')}").fetchone()[0] == \
        "51d2190c-cc46-56c5-b2ea-363895cbea75"  # an integer key is cast to text, as str() does


def _datetime_macro():
    return jinja2.Environment().from_string(MACRO_FILE.read_text()).module.fhir_datetime


@pytest.mark.parametrize(("raw", "published"), [
    ("2174-12-16 15:20:00", "2174-12-16T15:20:00-05:00"),  # MIMIC-IV on FHIR IG example (winter)
    ("2177-07-14 20:38:00", "2177-07-14T20:38:00-04:00"),  # IG example (summer)
    # kind-lab/mimic-fhir#124: an admission at 02:01 on a spring-forward day is published one hour later
    ("2174-03-13 02:01:00", "2174-03-13T03:01:00-04:00"),
    ("2174-11-06 01:30:00", "2174-11-06T01:30:00-05:00"),  # PostgreSQL reads an ambiguous time as standard time
    ("2133-12-31 23:59:00", "2133-12-31T23:59:00-05:00"),
])
def test_raw_times_are_written_as_mimic_iv_on_fhir_writes_them(raw, published):
    sql = _datetime_macro()("t", zone="America/New_York")
    assert duckdb.sql(f"select {sql} from (select timestamp '{raw}' as t)").fetchone()[0] == published


def test_raw_times_follow_the_new_york_zone_rules_on_any_date():
    """Away from the DST changes, the offset is Python's zoneinfo offset of the wall-clock time; the session's time
    zone does not matter."""
    from zoneinfo import ZoneInfo

    rng, zone = random.Random(1), ZoneInfo("America/New_York")
    times = [datetime(2100, 1, 1) + timedelta(minutes=rng.randrange(100 * 365 * 24 * 60)) for _ in range(300)]
    times = [t for t in times if t.hour not in (1, 2)]  # no gap or ambiguous hour
    con = duckdb.connect()
    con.execute("set TimeZone = 'Asia/Tokyo'")
    con.execute("create table t as select unnest(?::timestamp[]) as t", [times])
    rows = con.execute(f"select t, {_datetime_macro()('t', json=True, zone='America/New_York')} from t").fetchall()
    assert {t: text for t, text in rows} == {t: '"' + t.replace(tzinfo=zone).isoformat() + '"' for t in times}
