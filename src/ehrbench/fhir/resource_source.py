"""Where FHIR ground truth reads a view's resources: a build's exported `fhir/[<view>/]resources.duckdb`, or the
view's dbt models in the warehouse. The export copies those models' rows unchanged (ehrbench.fhir.export), so both
hold the same ids and JSON; reading the models lets the questions stage ground its questions while the fhir stage is
still exporting and validating the files (it fails the build on an invalid resource either way)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb

from ehrbench.fhir.export import fhir_relations
from ehrbench.warehouse import open_duckdb


@dataclass(frozen=True)
class WarehouseView:
    """A FHIR view's models (`schema`: FhirView.schema) in the warehouse file."""

    warehouse: Path
    schema: str


ResourceSource = Path | WarehouseView  # a Path: an exported resources.duckdb


@contextmanager
def resources_connection(source: ResourceSource) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection in which `resources` (id, resource) holds every resource of `source`."""
    if isinstance(source, WarehouseView):
        con = open_duckdb()
        try:
            quoted = str(source.warehouse).replace("'", "''")
            con.execute(f"attach '{quoted}' as warehouse (read_only)")
            selects = [f"select id, resource from warehouse.{relation}"
                       for relation in fhir_relations(con, "warehouse", source.schema)]
            con.execute(f"create temp view resources as {' union all '.join(selects)}")
        except BaseException:
            con.close()
            raise
    else:
        con = open_duckdb(str(source), read_only=True)
    try:
        yield con
    finally:
        con.close()
