"""Export of the FHIR resource tables into a build: ndjson.gz per type, a DuckDB table, validation."""

from __future__ import annotations

import gzip
import hashlib
import json

import duckdb
import pyarrow as pa
import pytest

from ehrbench.fhir.export import _string_bytes, export_fhir


def _patient(i: int, gender: str = "female") -> str:
    return json.dumps({"resourceType": "Patient", "id": f"p{i:03d}", "gender": gender, "birthDate": "2050-01-01"})


def _encounter(i: int, patient: int) -> str:
    return json.dumps({"resourceType": "Encounter", "id": f"e{i:03d}", "status": "finished",
                       "class": {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "IMP"},
                       "subject": {"reference": f"Patient/p{patient:03d}"}})


@pytest.fixture
def warehouse(tmp_path):
    def make(bad_patient: int | None = None, locations: tuple[str, ...] = ()):
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
        for i in range(30, 0, -1):  # inserted out of id order
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
