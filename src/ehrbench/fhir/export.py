"""Export of the FHIR resources built by dbt into a build: `fhir/<ResourceType>.ndjson.gz` (one resource per line,
in id order, gzip without a timestamp so that equal builds give equal files) and `fhir/resources.duckdb` (table
`resources`: id, resource_type, patient_id, source_table, source_key, resource as JSON), plus their validation."""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from ehrbench.errors import MissingInputError
from ehrbench.fhir.validation import ValidationReport, validate_resources
from ehrbench.layout import BuildLayout

# The schema of the FHIR view's dbt models (dbt_project/models/fhir/mimic_iv/): every table in it is one resource
# table with the columns below, so a new model is exported without a change here.
FHIR_SCHEMA = "fhir__mimic_iv"
RESOURCE_COLUMNS = ("id", "resource_type", "patient_id", "source_table", "source_key", "resource")
_BATCH = 10_000


@dataclass
class FhirExport:
    counts: dict[str, int]  # resource type -> resources
    files: dict[str, str]  # resource type (or "duckdb") -> path relative to the build
    validation: ValidationReport = field(default_factory=ValidationReport)
    validated_patients: int | None = None  # None: every resource was validated
    dangling_references: int = 0  # references to no resource of the build
    dangling_examples: list[str] = field(default_factory=list)  # "<Type>/<id> -> <reference>", a few


def export_fhir(warehouse: Path, build_dir: Path, *, seed: int = 0, validate_limit: int = 200_000) -> FhirExport:
    """Write the FHIR files of a build and validate the resources: all of them up to `validate_limit`, else every
    resource of a seeded sample of patients sized to about `validate_limit` resources."""
    build = BuildLayout(build_dir)
    build.fhir.mkdir(parents=True, exist_ok=True)
    database = build.fhir_resources
    if database.exists():
        raise FileExistsError(f"{database} exists; files of a build are written once")
    con = duckdb.connect(str(database))
    try:
        con.execute("set enable_progress_bar = false")
        con.execute(f"attach '{warehouse}' as \"{warehouse.stem}\" (read_only)")
        relations = fhir_relations(con, warehouse.stem)
        union = " union all ".join(
            f'select id, resource_type, patient_id, source_table, source_key, resource::json as resource '
            f'from "{warehouse.stem}".{relation}' for relation in relations)
        con.execute(f"create table resources as select * from ({union}) order by resource_type, id")
        con.execute(f'detach "{warehouse.stem}"')
        counts = dict(con.execute("select resource_type, count(*) from resources group by 1 order by 1").fetchall())
        files = {"duckdb": str(database.relative_to(build_dir))}
        for resource_type in counts:
            path = build.fhir_ndjson(resource_type)
            _write_ndjson(con, resource_type, path)
            files[resource_type] = str(path.relative_to(build_dir))
        result = FhirExport(counts=counts, files=files)
        result.dangling_references, result.dangling_examples = _dangling_references(con)
        total = sum(counts.values())
        if total <= validate_limit:
            texts, expected = con.execute("select resource::varchar from resources"), total
        else:
            n_patients = con.execute("select count(distinct patient_id) from resources").fetchone()[0]
            result.validated_patients = max(1, n_patients * validate_limit // total)
            texts = con.execute(
                "select resource::varchar from resources where patient_id is null or patient_id in ("
                "  select patient_id from (select distinct patient_id from resources) "
                "  order by md5(patient_id || ?) limit ?)", [str(seed), result.validated_patients])
            expected = validate_limit
        result.validation = validate_resources(_stream(texts), expected=expected)
    except BaseException:
        con.close()
        for path in build.fhir.glob("*"):
            path.unlink()
        raise
    con.close()
    return result


def fhir_relations(con: duckdb.DuckDBPyConnection, catalog: str) -> list[str]:
    """The resource tables of the FHIR view in an attached warehouse, checked for the expected columns."""
    tables = con.execute(
        "select table_name, list(column_name order by ordinal_position) from information_schema.columns "
        "where table_catalog = ? and table_schema = ? group by table_name order by table_name",
        [catalog, FHIR_SCHEMA]).fetchall()
    if not tables:
        raise MissingInputError(f"no FHIR resource tables in schema {FHIR_SCHEMA} of {catalog}: "
                                "run `dbt build --select fhir`")
    for table, columns in tables:
        missing = [c for c in RESOURCE_COLUMNS if c not in columns]
        if missing:
            raise ValueError(f"{FHIR_SCHEMA}.{table} lacks the resource column(s) {missing}; "
                             f"expected {RESOURCE_COLUMNS}")
    return [f"{FHIR_SCHEMA}.{table}" for table, _ in tables]


def _dangling_references(con: duckdb.DuckDBPyConnection, shown: int = 5) -> tuple[int, list[str]]:
    """References (`"reference": "<Type>/<id>"` anywhere in a resource) that name no resource of the build."""
    con.execute("""
        create temp table dangling as
        with refs as (
            select resource_type, id, unnest(json_extract_string(resource, '$..reference')) as reference
            from resources
        )
        select refs.* from refs
        anti join resources as target
            on target.resource_type = split_part(refs.reference, '/', 1)
           and target.id = split_part(refs.reference, '/', 2)
    """)
    count = con.execute("select count(*) from dangling").fetchone()[0]
    examples = [f"{kind}/{id_} -> {reference}" for kind, id_, reference in con.execute(
        "select resource_type, id, reference from dangling order by all limit ?", [shown]).fetchall()]
    con.execute("drop table dangling")
    return count, examples


def _stream(result: duckdb.DuckDBPyConnection):
    while batch := result.fetchmany(_BATCH):
        for (text,) in batch:
            yield text


def _write_ndjson(con: duckdb.DuckDBPyConnection, resource_type: str, path: Path) -> None:
    rows = con.execute("select resource::varchar from resources where resource_type = ? order by id", [resource_type])
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
        for text in _stream(rows):
            out.write(text.encode() + b"\n")
