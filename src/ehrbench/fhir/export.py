"""Export of the FHIR resources built by dbt into a build: `fhir/<ResourceType>.ndjson.gz` (one resource per line,
in id order, gzip without a timestamp so that equal builds give equal files) and `fhir/resources.duckdb` (table
`resources`: id, resource_type, patient_id, source_table, source_key, resource as JSON), plus their validation."""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from ehrbench.fhir.validation import ValidationReport, validate_resources

# The dbt models of the FHIR view (dbt_project/models/fhir/), one per resource table.
FHIR_RELATIONS: tuple[str, ...] = ("fhir__mimic_iv.patient", "fhir__mimic_iv.encounter", "fhir__mimic_iv.condition",
                                   "fhir__mimic_iv.procedure")
_BATCH = 10_000


@dataclass
class FhirExport:
    counts: dict[str, int]  # resource type -> resources
    files: dict[str, str]  # resource type (or "duckdb") -> path relative to the build
    validation: ValidationReport = field(default_factory=ValidationReport)
    validated_patients: int | None = None  # None: every resource was validated


def export_fhir(warehouse: Path, build_dir: Path, *, seed: int = 0, validate_limit: int = 200_000) -> FhirExport:
    """Write the FHIR files of a build and validate the resources: all of them up to `validate_limit`, else every
    resource of a seeded sample of patients sized to about `validate_limit` resources."""
    folder = build_dir / "fhir"
    folder.mkdir(parents=True, exist_ok=True)
    database = folder / "resources.duckdb"
    if database.exists():
        raise FileExistsError(f"{database} exists; files of a build are written once")
    con = duckdb.connect(str(database))
    try:
        con.execute("set enable_progress_bar = false")
        con.execute(f"attach '{warehouse}' as \"{warehouse.stem}\" (read_only)")
        union = " union all ".join(
            f'select id, resource_type, patient_id, source_table, source_key, resource::json as resource '
            f'from "{warehouse.stem}".{relation}' for relation in FHIR_RELATIONS)
        con.execute(f"create table resources as select * from ({union}) order by resource_type, id")
        con.execute(f'detach "{warehouse.stem}"')
        counts = dict(con.execute("select resource_type, count(*) from resources group by 1 order by 1").fetchall())
        files = {"duckdb": str(database.relative_to(build_dir))}
        for resource_type in counts:
            path = folder / f"{resource_type}.ndjson.gz"
            _write_ndjson(con, resource_type, path)
            files[resource_type] = str(path.relative_to(build_dir))
        result = FhirExport(counts=counts, files=files)
        total = sum(counts.values())
        if total <= validate_limit:
            texts = con.execute("select resource::varchar from resources")
        else:
            n_patients = con.execute("select count(distinct patient_id) from resources").fetchone()[0]
            result.validated_patients = max(1, n_patients * validate_limit // total)
            texts = con.execute(
                "select resource::varchar from resources where patient_id in ("
                "  select patient_id from (select distinct patient_id from resources) "
                "  order by md5(patient_id || ?) limit ?)", [str(seed), result.validated_patients])
        result.validation = validate_resources(_stream(texts))
    except BaseException:
        con.close()
        for path in folder.glob("*"):
            path.unlink()
        raise
    con.close()
    return result


def _stream(result: duckdb.DuckDBPyConnection):
    while batch := result.fetchmany(_BATCH):
        for (text,) in batch:
            yield text


def _write_ndjson(con: duckdb.DuckDBPyConnection, resource_type: str, path: Path) -> None:
    rows = con.execute("select resource::varchar from resources where resource_type = ? order by id", [resource_type])
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
        for text in _stream(rows):
            out.write(text.encode() + b"\n")
