"""Tiny FHIR resource databases for tests: the table the FHIR export writes, filled with hand-written resources."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb


def write_resources_db(path: Path, resources: list[dict]) -> Path:
    """A resources.duckdb as the FHIR export writes it (same table and columns)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(path)) as con:
        con.execute("create table resources (id varchar, resource_type varchar, patient_id varchar, "
                    "source_table varchar, source_key json, resource json)")
        con.executemany("insert into resources values (?, ?, ?, 'hand', '{}', ?)", [
            (r["id"], r["resourceType"],
             r["id"] if r["resourceType"] == "Patient" else r.get("subject", {}).get("reference", "/")[8:] or None,
             json.dumps(r)) for r in resources])
    return path
