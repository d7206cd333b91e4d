"""The two places ground truth reads a FHIR view's resources from: a build's exported resources.duckdb and the view's
models in the warehouse. On a hand-made warehouse (two resource tables of one view, one of another), the warehouse
source holds exactly the rows of the view's own tables, so grounding finds the same ids either way."""

from __future__ import annotations

import duckdb
import pytest

from ehrbench.errors import MissingInputError
from ehrbench.fhir.export import RESOURCE_COLUMNS
from ehrbench.fhir.ground_truth import present_resources
from ehrbench.fhir.resource_source import WarehouseView, resources_connection

VIEW = "fhir__mimic_iv"
ROWS = {  # table -> (id, resource_type); the other view's table must not be read
    f"{VIEW}.observation_labevents": [("lab-1", "Observation"), ("lab-2", "Observation")],
    f"{VIEW}.patient": [("pat-1", "Patient")],
    "fhir__mimic_iv_on_fhir.patient": [("other-view-1", "Patient")],
}


@pytest.fixture
def warehouse(tmp_path):
    path = tmp_path / "o'brien warehouse.duckdb"  # a quote in the path: the attach must escape it
    con = duckdb.connect(str(path))
    for table, rows in ROWS.items():
        con.execute(f"create schema if not exists {table.split('.')[0]}")
        con.execute(f"create table {table} ({', '.join(f'{c} varchar' for c in RESOURCE_COLUMNS)})")
        for resource_id, kind in rows:
            con.execute(f"insert into {table} (id, resource_type, resource) values (?, ?, ?)",
                        [resource_id, kind, f'{{"resourceType": "{kind}", "id": "{resource_id}"}}'])
    con.close()
    return path


def test_the_warehouse_view_holds_its_own_tables_rows_only(warehouse):
    with resources_connection(WarehouseView(warehouse, VIEW)) as con:
        rows = con.execute("select id, resource::varchar from resources order by id").fetchall()
    assert rows == [("lab-1", '{"resourceType": "Observation", "id": "lab-1"}'),
                    ("lab-2", '{"resourceType": "Observation", "id": "lab-2"}'),
                    ("pat-1", '{"resourceType": "Patient", "id": "pat-1"}')]


def test_grounding_finds_the_same_ids_in_the_warehouse_as_in_an_export(warehouse, tmp_path):
    exported = tmp_path / "resources.duckdb"
    con = duckdb.connect(str(exported))
    con.execute("create table resources as select unnest(['lab-1', 'pat-1']) as id")
    con.close()
    asked = {"lab-1", "pat-1", "other-view-1", "missing"}
    assert present_resources(WarehouseView(warehouse, VIEW), asked) == {"lab-1", "pat-1"}
    assert present_resources(exported, asked) == {"lab-1", "pat-1"}


def test_a_view_without_models_is_a_clear_error(warehouse):
    with pytest.raises(MissingInputError, match="no FHIR resource tables in schema fhir__nothing"), \
            resources_connection(WarehouseView(warehouse, "fhir__nothing")):
        pass
