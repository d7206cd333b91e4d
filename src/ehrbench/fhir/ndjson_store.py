"""A folder of FHIR R4 ndjson (`<Type>.ndjson[.gz]`, one resource per line — a build's export, or a download of
MIMIC-IV on FHIR such as the credentialed full release) as the `resources` table that `ehrbench fhir serve` and the
agents' tools read (the columns of a build's `fhir/.../resources.duckdb`).

A resource's patient is its own id for a Patient, else the Patient its `subject` or `patient` reference names."""

from __future__ import annotations

from pathlib import Path

import duckdb

from ehrbench.errors import ConfigError
from ehrbench.warehouse import open_duckdb

PATTERNS = ("*.ndjson", "*.ndjson.gz")


def ndjson_files(folder: Path) -> list[Path]:
    files = sorted(f for pattern in PATTERNS for f in folder.glob(pattern) if f.is_file())
    if not files:
        raise ConfigError(f"--ndjson: no *.ndjson or *.ndjson.gz files in {folder}; expected a folder of FHIR R4 "
                          "ndjson, one resource per line (e.g. MIMIC-IV on FHIR's fhir/ folder)")
    return files


def load_ndjson(folder: Path, database: Path) -> dict[str, int]:
    """Write every resource of `folder`'s ndjson files into a new `database`; return the count per type."""
    files = ndjson_files(folder)
    if database.exists():
        raise FileExistsError(f"{database} exists")
    with open_duckdb(str(database)) as con:
        con.execute("create table resources (id varchar, resource_type varchar, patient_id varchar, "
                    "source_table varchar, source_key json, resource json)")
        for file in files:
            try:
                con.execute("""
                    insert into resources
                    select json ->> 'id', json ->> 'resourceType',
                           case when json ->> 'resourceType' = 'Patient' then json ->> 'id'
                                else regexp_extract(coalesce(json -> 'subject' ->> 'reference',
                                                             json -> 'patient' ->> 'reference', ''),
                                                    '^Patient/(.+)$', 1) end,
                           ?, null, json
                    from read_ndjson_objects(?)""", [file.name, str(file)])
            except duckdb.Error as exc:
                raise ConfigError(f"--ndjson: {file}: not FHIR ndjson ({str(exc).splitlines()[0]})") from None
        con.execute("update resources set patient_id = null where patient_id = ''")
        missing = con.execute("select count(*) from resources where id is null or resource_type is null").fetchone()[0]
        if missing:
            raise ConfigError(f"--ndjson: {missing} line(s) of {folder} have no id or resourceType; expected FHIR "
                              "resources")
        return dict(con.execute("select resource_type, count(*) from resources group by 1 order by 1").fetchall())
