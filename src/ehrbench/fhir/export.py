"""Export of a FHIR view built by dbt into a build: `fhir/[<view>/]<ResourceType>.ndjson.gz` (one resource per line,
in id order, gzip without a timestamp so that equal builds give equal files) and `fhir/[<view>/]resources.duckdb`
(table `resources`: id, resource_type, patient_id, source_table, source_key, resource as JSON), plus their
validation.

Two views (dbt_project/models/fhir/): the EHRSQL-aligned one (`fhir/`: the EHRSQL-2024 database's rows and shifted
times, which the generated FHIR suite and its ground truth use) and `mimic_iv_on_fhir` (`fhir/mimic_iv_on_fhir/`:
MIMIC-IV on FHIR's resources of every raw row, raw times: what FHIR-AgentBench's questions were answered on)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
from isal import igzip

from ehrbench.errors import MissingInputError
from ehrbench.fhir.validation import ValidationReport, validate_resources
from ehrbench.layout import BuildLayout
from ehrbench.warehouse import WAREHOUSE_STORAGE_VERSION, open_duckdb


@dataclass(frozen=True)
class FhirView:
    """A FHIR view: the warehouse schema of its dbt models (every table in it is one resource table with the
    RESOURCE_COLUMNS, so a new model is exported without a change here), its folder under the build's `fhir/`
    (None: `fhir/` itself) and how many of its resources a build validates at most (a seeded sample of patients
    beyond)."""

    schema: str
    folder: str | None
    validate_limit: int


EHRSQL_ALIGNED_VIEW = FhirView(schema="fhir__mimic_iv", folder=None, validate_limit=200_000)
# every raw row: ~500k resources on the demo, ~100M on the full MIMIC-IV; its rules are pinned by the dbt tests and
# tests/integration/test_fhir_mimic_iv_on_fhir.py, so a build validates a sample of its patients (~10k resources: in
# one process, a few seconds)
MIMIC_IV_ON_FHIR_VIEW = FhirView(schema="fhir__mimic_iv_on_fhir", folder="mimic_iv_on_fhir", validate_limit=10_000)
FHIR_VIEWS = (EHRSQL_ALIGNED_VIEW, MIMIC_IV_ON_FHIR_VIEW)


def fhir_selection(mimic_iv_on_fhir: bool = True) -> list[str]:
    """dbt selectors of the FHIR models a build exports: both views (and what FHIR-AgentBench's import reads), or the
    EHRSQL-aligned view's alone."""
    return ["fhir", "mimic_iv_on_fhir_race", "fhir_agentbench"] if mimic_iv_on_fhir else ["fhir.mimic_iv"]


RESOURCE_COLUMNS = ("id", "resource_type", "patient_id", "source_table", "source_key", "resource")
# DuckDB's memory for an export, in place of open_duckdb's general limit: sorts spill to disk beyond it. The
# mimic_iv_on_fhir view's ×10 scale-up (5 M resources) peaked at 14 GiB under DuckDB's default (80 % of the
# machine); it takes 3.5 GiB with this
EXPORT_MEMORY_LIMIT = "3GB"
_BATCH = 10_000


@dataclass
class FhirExport:
    counts: dict[str, int]  # resource type -> resources
    files: dict[str, str]  # resource type (or "duckdb") -> path relative to the build
    validation: ValidationReport = field(default_factory=ValidationReport)
    validated_patients: int | None = None  # None: every resource was validated
    dangling_references: int = 0  # references to no resource of the build
    dangling_examples: list[str] = field(default_factory=list)  # "<Type>/<id> -> <reference>", a few


def export_fhir(warehouse: Path, build_dir: Path, *, view: FhirView = EHRSQL_ALIGNED_VIEW, seed: int = 0,
                validate_limit: int | None = None) -> FhirExport:
    """Write the FHIR files of one view of a build and validate the resources: all of them up to `validate_limit`
    (default: the view's), else every resource of a seeded sample of patients sized to about `validate_limit`
    resources."""
    validate_limit = view.validate_limit if validate_limit is None else validate_limit
    build = BuildLayout(build_dir)
    folder = build.fhir_view(view.folder)
    folder.mkdir(parents=True, exist_ok=True)
    database = build.fhir_view_resources(view.folder)
    if database.exists():
        raise FileExistsError(f"{database} exists; files of a build are written once")
    con = open_duckdb(str(database), storage_version=WAREHOUSE_STORAGE_VERSION)
    try:
        con.execute(f"set memory_limit = '{EXPORT_MEMORY_LIMIT}'")
        con.execute("set force_compression = 'zstd'")  # as the warehouse stores FHIR JSON (dbt_project.yml)
        con.execute("set preserve_insertion_order = true")  # a scan without ORDER BY returns rows as inserted
        con.execute(f"attach '{warehouse}' as \"{warehouse.stem}\" (read_only)")
        relations = fhir_relations(con, warehouse.stem, view.schema)
        by_type: dict[str, list[str]] = {}  # resource type -> a select of its resources from each relation
        for relation in relations:
            source = f'"{warehouse.stem}".{relation}'
            kinds = [t for (t,) in con.execute(f"select distinct resource_type from {source} order by 1").fetchall()]
            for kind in kinds:  # a relation of one type is read whole: a filter would make the sort need more memory
                where = "" if len(kinds) == 1 else f" where resource_type = '{kind.replace(chr(39), chr(39) * 2)}'"
                by_type.setdefault(kind, []).append(f"select {', '.join(RESOURCE_COLUMNS)} from {source}{where}")
        con.execute("create table resources (id varchar, resource_type varchar, patient_id varchar, "
                    "source_table varchar, source_key varchar, resource json)")
        counts, files = {}, {"duckdb": str(database.relative_to(build_dir))}
        # One type at a time, each sorted by id: the table ends up in (resource_type, id) order, and a sort holds one
        # type's resources, not the view's (an Observation sort spills beyond the memory limit)
        for resource_type in sorted(by_type):
            union = " union all ".join(by_type[resource_type])
            counts[resource_type] = con.execute(f"insert into resources {union} order by id").fetchone()[0]
            path = build.fhir_ndjson(resource_type, view.folder)
            _write_ndjson(con, resource_type, path)
            files[resource_type] = str(path.relative_to(build_dir))
        con.execute(f'detach "{warehouse.stem}"')
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
        for path in folder.glob("*"):
            if path.is_file():  # the other views' folders stay
                path.unlink()
        raise
    con.close()
    return result


def fhir_relations(con: duckdb.DuckDBPyConnection, catalog: str, schema: str = EHRSQL_ALIGNED_VIEW.schema) -> list[str]:
    """The resource tables of a FHIR view's schema in an attached warehouse, checked for the expected columns."""
    tables = con.execute(
        "select table_name, list(column_name order by ordinal_position) from information_schema.columns "
        "where table_catalog = ? and table_schema = ? group by table_name order by table_name",
        [catalog, schema]).fetchall()
    if not tables:
        raise MissingInputError(f"no FHIR resource tables in schema {schema} of {catalog}: "
                                "run `dbt build --select fhir`")
    for table, columns in tables:
        missing = [c for c in RESOURCE_COLUMNS if c not in columns]
        if missing:
            raise ValueError(f"{schema}.{table} lacks the resource column(s) {missing}; "
                             f"expected {RESOURCE_COLUMNS}")
    return [f"{schema}.{table}" for table, _ in tables]


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
    """One resource per line in id order, gzip without a name or a timestamp. Streamed in record batches (a view's
    largest type is gigabytes of text), each written as the one buffer Arrow keeps its strings in: DuckDB appends
    the newline, Python never touches a line.

    ISA-L's deflate (python-isal) at level 1: ~7x faster than zlib's level 1 on FHIR JSON, and a smaller file. Its
    output depends only on the input and the library's version (not on the CPU among x86-64 ones with SSE4.2), so
    equal builds on equal installs give equal files; any gzip reader reads them."""
    result = con.execute("select resource::varchar || chr(10) from resources where resource_type = ?",
                         [resource_type])  # in insertion order, which is id order (export_fhir)
    with open(path, "wb") as raw, igzip.IGzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                   compresslevel=1) as out:
        for batch in result.to_arrow_reader(_NDJSON_BATCH):
            out.write(_string_bytes(batch.column(0)))


_NDJSON_BATCH = 100_000  # rows: ~100 MB of FHIR JSON per write


def _string_bytes(strings: pa.Array) -> memoryview:
    """The concatenated bytes of an Arrow string array without nulls (zero-copy: its data buffer between the first
    and the last offset)."""
    if strings.null_count:
        raise ValueError("a FHIR resource is NULL; every resource table row must hold a resource")
    _, offsets_buffer, data = strings.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64 if pa.types.is_large_string(strings.type) else np.int32)
    first, last = int(offsets[strings.offset]), int(offsets[strings.offset + len(strings)])
    return memoryview(data)[first:last] if data is not None else memoryview(b"")
