"""Export of the FHIR resource tables into a build: ndjson.gz per type, a DuckDB file, validation."""

from __future__ import annotations

import gzip
import hashlib
import json

import duckdb
import pyarrow as pa
import pytest
import yaml

from ehrbench.errors import MissingInputError
from ehrbench.fhir.export import (
    EHRSQL_ALIGNED_VIEW,
    MIMIC_IV_ON_FHIR_VIEW,
    FhirView,
    _dangling_references,
    _IdOrder,
    _string_bytes,
    export_fhir,
    remove_view_databases,
)
from ehrbench.transform import PROJECT_DIR, attached_databases


def _patient(i: int, gender: str = "female") -> str:
    return json.dumps({"resourceType": "Patient", "id": f"p{i:03d}", "gender": gender, "birthDate": "2050-01-01"})


def _encounter(i: int, patient: int) -> str:
    return json.dumps({"resourceType": "Encounter", "id": f"e{i:03d}", "status": "finished",
                       "class": {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "IMP"},
                       "subject": {"reference": f"Patient/p{patient:03d}"}})


@pytest.fixture
def warehouse(tmp_path):
    def make(bad_patient: int | None = None, locations: tuple[str, ...] = (), patients_out_of_order: bool = False):
        path = tmp_path / "warehouse.duckdb"
        path.unlink(missing_ok=True)
        con = duckdb.connect(str(path))
        con.execute("create schema fhir__mimic_iv")
        columns = "id varchar, resource_type varchar, patient_id varchar, source_table varchar, source_key varchar, " \
                  "resource varchar"
        con.execute(f"create table fhir__mimic_iv.patient ({columns})")
        con.execute(f"create table fhir__mimic_iv.encounter ({columns})")
        for empty in ("condition", "procedure"):  # the other resource tables of the FHIR view
            con.execute(f"create table fhir__mimic_iv.{empty} ({columns})")
        con.execute(f"create table fhir__mimic_iv.location ({columns})")
        for name in locations:  # a resource of no patient
            con.execute("insert into fhir__mimic_iv.location values (?, 'Location', null, 'transfers', '{}', ?)",
                        [name, json.dumps({"resourceType": "Location", "id": name, "name": name})])
        # in id order, as every FHIR model stores its rows (fhir_rows_in_id_order)
        for i in (range(30, 0, -1) if patients_out_of_order else range(1, 31)):
            gender = "F" if i == bad_patient else "female"
            con.execute("insert into fhir__mimic_iv.patient values (?, 'Patient', ?, 'patients', '{}', ?)",
                        [f"p{i:03d}", f"p{i:03d}", _patient(i, gender)])
            for j in range(2):
                con.execute("insert into fhir__mimic_iv.encounter values (?, 'Encounter', ?, 'admissions', '{}', ?)",
                            [f"e{i * 2 + j:03d}", f"p{i:03d}", _encounter(i * 2 + j, i)])
        con.close()
        return path
    return make


def test_files_hold_every_resource_in_id_order_and_are_reproducible(warehouse, tmp_path):
    digests = []
    for build in ("b1", "b2"):
        result = export_fhir(warehouse(), tmp_path / build)
        assert result.counts == {"Encounter": 60, "Patient": 30}
        assert result.validation.ok and result.validation.checked == 90 and result.validated_patients is None
        with gzip.open(tmp_path / build / result.files["Patient"], "rt") as lines:
            ids = [json.loads(line)["id"] for line in lines]
        assert ids == sorted(ids) and len(ids) == 30
        digests.append(hashlib.sha256((tmp_path / build / result.files["Encounter"]).read_bytes()).hexdigest())
        con = duckdb.connect(str(tmp_path / build / result.files["duckdb"]), read_only=True)
        assert con.execute("select count(*), count(distinct patient_id) from resources").fetchone() == (90, 30)
        assert con.execute("select resource->>'status' from resources where id = 'e002'").fetchone() == ("finished",)
        con.close()
    assert digests[0] == digests[1]


def test_files_are_the_same_whatever_the_compression_threads(warehouse, tmp_path, monkeypatch):
    monkeypatch.setattr("ehrbench.fhir.export._GZIP_BLOCK", 1024)  # the Encounter file's ~12 KB of JSON: a dozen blocks
    digests = []
    for threads in (1, 2):
        monkeypatch.setattr("ehrbench.fhir.export.COMPRESS_THREADS", threads)
        result = export_fhir(warehouse(), tmp_path / f"t{threads}")
        raw = (tmp_path / f"t{threads}" / result.files["Encounter"]).read_bytes()
        assert len(gzip.decompress(raw).splitlines()) == 60 and raw[4:8] == b"\0\0\0\0"  # mtime 0
        digests.append(hashlib.sha256(raw).hexdigest())
    assert digests[0] == digests[1]


def test_a_type_from_several_tables_is_written_table_by_table_each_in_id_order(warehouse, tmp_path):
    path = warehouse()
    con = duckdb.connect(str(path))
    columns = "id varchar, resource_type varchar, patient_id varchar, source_table varchar, source_key varchar, " \
              "resource varchar"
    con.execute(f"create table fhir__mimic_iv.encounter_icu ({columns})")
    for i in (3, 5, 100):  # ids between and beyond the hospital Encounters' e002..e061
        con.execute("insert into fhir__mimic_iv.encounter_icu values (?, 'Encounter', 'p001', 'icustays', '{}', ?)",
                    [f"e{i:03d}x", _encounter(i, 1).replace(f'"e{i:03d}"', f'"e{i:03d}x"')])
    con.close()
    result = export_fhir(path, tmp_path / "b1")
    with gzip.open(tmp_path / "b1" / result.files["Encounter"], "rt") as lines:
        ids = [json.loads(line)["id"] for line in lines]
    hospital = [f"e{i:03d}" for i in range(2, 62)]
    assert ids == hospital + ["e003x", "e005x", "e100x"]  # table encounter, then encounter_icu (name order)
    con = duckdb.connect(str(tmp_path / "b1" / result.files["duckdb"]), read_only=True)
    assert [i for (i,) in con.execute("select id from resources where resource_type = 'Encounter'").fetchall()] == ids
    con.close()


def test_a_table_not_in_id_order_fails_the_export_naming_it_and_leaves_no_files(warehouse, tmp_path):
    # Encounter, the first type written: e060, e061, then e058 (row 2)
    with pytest.raises(ValueError, match=r"fhir__mimic_iv\.encounter: its rows are not in id order \(row 2 .*"
                                         r"fhir_rows_in_id_order"):
        export_fhir(warehouse(patients_out_of_order=True), tmp_path / "b1")
    assert not [p for p in (tmp_path / "b1" / "fhir").iterdir() if p.is_file()]


def test_id_order_is_checked_within_and_across_batches():
    order = _IdOrder("a")
    order.check(pa.array(["k", "m"]))
    order.check(pa.array(["n", "p"]))
    order.check(pa.array([], pa.string()))
    with pytest.raises(ValueError, match=r"a: its rows are not in id order \(row 2 "):
        _IdOrder("a").check(pa.array(["k", "m", "l"]))
    broken_at_a_batch_start = _IdOrder("a")
    broken_at_a_batch_start.check(pa.array(["k", "m"]))
    with pytest.raises(ValueError, match=r"a: .*\(row 2 "):
        broken_at_a_batch_start.check(pa.array(["l", "n"]))
    equal_ids = _IdOrder("a")
    equal_ids.check(pa.array(["k", "k", "m"]))  # non-decreasing (uniqueness is dbt's test)
    equal_ids.check(pa.array(["m", "n"]))


def test_invalid_resources_are_reported_and_large_sets_are_sampled_by_patient(warehouse, tmp_path):
    result = export_fhir(warehouse(bad_patient=7), tmp_path / "b1")
    assert [label for label, _ in result.validation.failures] == ["Patient/p007"]
    sampled = export_fhir(warehouse(), tmp_path / "b2", validate_limit=30, seed=1)
    assert sampled.validated_patients == 10  # 30 patients x 30 / 90 resources
    assert sampled.validation.checked == 30  # every resource of the 10 sampled patients (1 + 2 each)
    again = export_fhir(warehouse(), tmp_path / "b3", validate_limit=30, seed=1)
    assert again.validation.checked == sampled.validation.checked


def test_a_published_fhir_folder_is_not_overwritten(warehouse, tmp_path):
    export_fhir(warehouse(), tmp_path / "b1")
    with pytest.raises(FileExistsError, match="resources.duckdb"):
        export_fhir(warehouse(), tmp_path / "b1")
    assert (tmp_path / "b1" / "fhir" / "Patient.ndjson.gz").exists()


def test_references_to_no_resource_of_the_build_are_counted(warehouse, tmp_path):
    path = warehouse(locations=("icu",))
    con = duckdb.connect(str(path))
    resource = json.loads(_encounter(900, 999))  # Patient/p999 does not exist
    resource["location"] = [{"location": {"reference": "Location/icu"}}, {"location": {"reference": "Location/ward"}}]
    con.execute("insert into fhir__mimic_iv.encounter values ('e900', 'Encounter', 'p999', 'admissions', '{}', ?)",
                [json.dumps(resource)])
    con.close()
    result = export_fhir(path, tmp_path / "b1")
    assert result.dangling_references == 2
    assert result.dangling_examples == ["Encounter/e900 -> Location/ward", "Encounter/e900 -> Patient/p999"]
    assert export_fhir(warehouse(locations=("icu",)), tmp_path / "b2").dangling_references == 0


def test_dangling_references_count_every_occurrence_and_show_the_first_by_referrer_then_reference():
    con = duckdb.connect()
    con.execute("create table resources (id varchar, resource_type varchar, resource json)")
    rows = [("p1", "Patient", {}),
            ("e2", "Encounter", {"subject": {"reference": "Patient/p9"}}),
            ("e1", "Encounter", {"subject": {"reference": "Patient/p9"},
                                 "location": [{"location": {"reference": "Location/x"}}]}),
            ("c1", "Condition", {"subject": {"reference": "Patient/p1"}, "encounter": {"reference": "Encounter/e1"}}),
            ("c2", "Condition", {"subject": {"reference": "Patient/p9"}, "note": [{"reference": "Patient/p9"}]})]
    for id_, kind, body in rows:
        con.execute("insert into resources values (?, ?, ?)", [id_, kind, json.dumps(body)])
    # occurrences of references to no resource, by (type, id, reference): Condition/c2 -> Patient/p9 (twice),
    # Encounter/e1 -> Location/x, Encounter/e1 -> Patient/p9, Encounter/e2 -> Patient/p9
    assert _dangling_references(con, shown=3) == (5, ["Condition/c2 -> Patient/p9", "Condition/c2 -> Patient/p9",
                                                      "Encounter/e1 -> Location/x"])
    assert _dangling_references(con, shown=5)[1][3:] == ["Encounter/e1 -> Patient/p9", "Encounter/e2 -> Patient/p9"]
    con.execute("delete from resources where resource_type <> 'Patient'")
    assert _dangling_references(con) == (0, [])


def test_sampled_validation_also_checks_resources_of_no_patient(warehouse, tmp_path):
    sampled = export_fhir(warehouse(locations=("icu", "ward")), tmp_path / "b1", validate_limit=30, seed=1)
    assert sampled.counts["Location"] == 2
    assert sampled.validated_patients == 9  # 30 patients x 30 / 92 resources
    assert sampled.validation.checked == 9 * 3 + 2  # the sampled patients' resources and both Locations


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()])
def test_a_batch_of_lines_is_written_as_its_string_bytes(kind):
    lines = pa.array(["{}\n", '{"a":"é"}\n', "x\n", "yz\n"], type=kind)
    assert bytes(_string_bytes(lines)) == '{}\n{"a":"é"}\nx\nyz\n'.encode()
    assert bytes(_string_bytes(lines.slice(1, 2))) == '{"a":"é"}\nx\n'.encode()  # an Arrow slice: offsets shifted
    assert bytes(_string_bytes(lines.slice(4))) == b""
    with pytest.raises(ValueError, match="NULL"):
        _string_bytes(pa.array(["{}\n", None], type=kind))


def test_a_view_built_into_a_database_of_its_own_is_copied_whole_and_written_alike(warehouse, tmp_path):
    from_warehouse = export_fhir(warehouse(), tmp_path / "b1")
    (tmp_path / "warehouse.duckdb").rename(tmp_path / "own.duckdb")  # the view's models, in a file of their own
    own = FhirView(schema="fhir__mimic_iv", folder=None, validate_limit=200_000, database="own")
    copied = export_fhir(tmp_path / "warehouse.duckdb", tmp_path / "b2", view=own)
    assert copied.counts == from_warehouse.counts == {"Encounter": 60, "Patient": 30}
    assert copied.validation.ok and copied.validation.checked == 90
    for kind in ("Encounter", "Patient"):
        assert (tmp_path / "b2" / copied.files[kind]).read_bytes() == (tmp_path / "b1" / from_warehouse.files[kind]
                                                                        ).read_bytes()
    for build in ("b1", "b2"):  # the same tables and view either way
        con = duckdb.connect(str(tmp_path / build / "fhir" / "resources.duckdb"), read_only=True)
        assert [t for (t,) in con.execute("select table_schema || '.' || table_name from information_schema.tables "
                                          "where table_type = 'BASE TABLE' order by 1").fetchall()] == [
            "fhir__mimic_iv.condition", "fhir__mimic_iv.encounter", "fhir__mimic_iv.location",
            "fhir__mimic_iv.patient", "fhir__mimic_iv.procedure"]
        assert con.execute("select count(*), count(distinct patient_id) from resources").fetchone() == (90, 30)
        con.close()


def test_a_view_database_that_is_missing_or_still_open_fails_the_export_clearly(tmp_path):
    own = FhirView(schema="fhir__mimic_iv", folder=None, validate_limit=10, database="own")
    with pytest.raises(MissingInputError, match=r"own\.duckdb does not exist: run `dbt build --select fhir`"):
        export_fhir(tmp_path / "warehouse.duckdb", tmp_path / "b1", view=own)
    duckdb.connect(str(tmp_path / "own.duckdb")).close()
    (tmp_path / "own.duckdb.wal").write_bytes(b"")  # what an unclosed writer leaves
    with pytest.raises(MissingInputError, match=r"own\.duckdb\.wal exists"):
        export_fhir(tmp_path / "warehouse.duckdb", tmp_path / "b2", view=own)
    assert not (tmp_path / "b2" / "fhir" / "resources.duckdb").exists()


def test_the_views_database_files_are_removed_before_dbt_builds_them_and_the_warehouse_stays(tmp_path):
    warehouse = tmp_path / "warehouse.duckdb"
    for name in ("warehouse.duckdb", "mimic_iv_on_fhir.duckdb", "mimic_iv_on_fhir.duckdb.wal"):
        (tmp_path / name).write_bytes(b"x")
    remove_view_databases(warehouse)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["warehouse.duckdb"]
    remove_view_databases(warehouse)  # nothing to remove: no error


def test_the_view_database_is_the_one_dbt_attaches_beside_the_warehouse(tmp_path):
    # profiles.yml attaches it under the view's name; dbt_project.yml builds the view's models into it
    warehouse = tmp_path / "warehouse.duckdb"
    assert attached_databases(warehouse) == {"mimic_iv_on_fhir": tmp_path / "mimic_iv_on_fhir.duckdb"}
    assert MIMIC_IV_ON_FHIR_VIEW.models_file(warehouse) == tmp_path / "mimic_iv_on_fhir.duckdb"
    assert EHRSQL_ALIGNED_VIEW.models_file(warehouse) == warehouse
    project = yaml.safe_load((PROJECT_DIR / "dbt_project.yml").read_text())
    assert project["models"]["ehrbench"]["fhir"]["mimic_iv_on_fhir"]["+database"] == MIMIC_IV_ON_FHIR_VIEW.database
