"""Export of a FHIR view built by dbt into a build: `fhir/[<view>/]<ResourceType>.ndjson.gz` (one resource per line,
gzip without a timestamp) and `fhir/[<view>/]resources.duckdb` (the view's tables, one per dbt model, under their
schema, and the view `resources` over all of them: id, resource_type, patient_id, source_table, source_key, resource
as JSON), plus their validation.

Order, so that equal builds give equal files: by resource type, then by the view's tables in name order, each table's
resources in id order. Each FHIR model stores its rows in id order (it sorts them before building their JSON:
dbt_project/macros/fhir_ids.sql, `fhir_rows_in_id_order`), so the export writes them as stored; it checks that order
as it writes the files, and fails naming a table whose rows are not in it.

Two views (dbt_project/models/fhir/): the EHRSQL-aligned one (`fhir/`: the EHRSQL-2024 database's rows and shifted
times, which the generated FHIR suite and its ground truth use; its tables are copied from the warehouse) and
`mimic_iv_on_fhir` (`fhir/mimic_iv_on_fhir/`: MIMIC-IV on FHIR's resources of every raw row, raw times: what
FHIR-AgentBench's questions were answered on; dbt builds its tables into a file of their own, which is copied whole)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from isal import igzip_threaded

from ehrbench.errors import MissingInputError
from ehrbench.fhir.validation import ValidationReport, validate_resources
from ehrbench.layout import BuildLayout
from ehrbench.warehouse import WAREHOUSE_STORAGE_VERSION, open_duckdb


@dataclass(frozen=True)
class FhirView:
    """A FHIR view: the schema of its dbt models (every table in it is one resource table with the RESOURCE_COLUMNS,
    so a new model is exported without a change here), its folder under the build's `fhir/` (None: `fhir/` itself),
    how many of its resources a build validates at most (a seeded sample of patients beyond), and the database dbt
    builds its models into: the warehouse (None) or a file of their own beside it, `<database>.duckdb`
    (dbt_project/profiles.yml attaches it under that name), which the export copies whole."""

    schema: str
    folder: str | None
    validate_limit: int
    database: str | None = None

    def models_file(self, warehouse: Path) -> Path:
        """The DuckDB file that holds the view's models."""
        return warehouse if self.database is None else warehouse.with_name(f"{self.database}.duckdb")


# Each view's rules are pinned by the dbt tests and by tests that validate every resource the MIMIC-IV demo gives
# (tests/integration/test_fhir_resources.py, _observations.py, _medications.py for this view), so a build validates
# every resource of a seeded sample of its patients (~10k resources: in one process, ~1.3 s), which catches what its
# own data brings. All of this view's 85k demo resources took ~11 s of CPU in each demo build (fhir.resources, ~128 us
# each), a tenth of the build's.
EHRSQL_ALIGNED_VIEW = FhirView(schema="fhir__mimic_iv", folder=None, validate_limit=10_000)
# every raw row: ~500k resources on the demo, ~100M on the full MIMIC-IV (tests/integration/
# test_fhir_mimic_iv_on_fhir.py). Its models' own file: at 10,000 patients (50 M resources, 8 GB) copying the file
# takes seconds, inserting its rows into another 112 s
MIMIC_IV_ON_FHIR_VIEW = FhirView(schema="fhir__mimic_iv_on_fhir", folder="mimic_iv_on_fhir", validate_limit=10_000,
                                 database="mimic_iv_on_fhir")
FHIR_VIEWS = (EHRSQL_ALIGNED_VIEW, MIMIC_IV_ON_FHIR_VIEW)


def remove_view_databases(warehouse: Path) -> None:
    """Delete the FHIR views' own database files beside `warehouse` before dbt builds them anew, so that a file holds
    this build's tables only, without the blocks that replaced tables leave free (the export copies it whole)."""
    for view in FHIR_VIEWS:
        if view.database is not None:
            models = view.models_file(warehouse)
            models.unlink(missing_ok=True)
            Path(f"{models}.wal").unlink(missing_ok=True)


def fhir_selection(mimic_iv_on_fhir: bool = True) -> list[str]:
    """dbt selectors of the FHIR models a build exports: both views (and what FHIR-AgentBench's import reads), or the
    EHRSQL-aligned view's alone."""
    return ["fhir", "mimic_iv_on_fhir_race", "fhir_agentbench"] if mimic_iv_on_fhir else ["fhir.mimic_iv"]


RESOURCE_COLUMNS = ("id", "resource_type", "patient_id", "source_table", "source_key", "resource")
# DuckDB's memory for an export, in place of open_duckdb's general limit: the reference check spills to disk beyond
# it. The mimic_iv_on_fhir view's ×10 scale-up (5 M resources) peaked at 14 GiB under DuckDB's default (80 %
# of the machine, when the export still sorted each type); 3.5 GiB with this
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
    con = None
    try:
        if view.database is not None:
            _copy_file(view.models_file(warehouse), database)
        con = open_duckdb(str(database), storage_version=WAREHOUSE_STORAGE_VERSION,  # the version of a new file
                          memory_limit=EXPORT_MEMORY_LIMIT)
        if view.database is None:
            _copy_tables(con, warehouse, view.schema)
        relations = fhir_relations(con, database.stem, view.schema)
        con.execute("create view resources as " + " union all ".join(
            f"select {', '.join(RESOURCE_COLUMNS)} from {relation}" for relation in relations))
        by_type: dict[str, list[tuple[str, int]]] = {}  # resource type -> (relation, its resources of the type)
        for relation in relations:  # in name order
            for kind, rows in con.execute(f"select resource_type, count(*) from {relation} group by 1").fetchall():
                by_type.setdefault(kind, []).append((relation, rows))
        counts, files = {}, {"duckdb": str(database.relative_to(build_dir))}
        for resource_type in sorted(by_type):
            counts[resource_type] = sum(rows for _, rows in by_type[resource_type])
            path = build.fhir_ndjson(resource_type, view.folder)
            _write_ndjson(con, resource_type, path, [relation for relation, _ in by_type[resource_type]])
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
        if con is not None:
            con.close()
        for path in folder.glob("*"):
            if path.is_file():  # the other views' folders stay
                path.unlink()
        raise
    con.close()
    return result


def _copy_tables(con: duckdb.DuckDBPyConnection, warehouse: Path, schema: str) -> None:
    """The resource tables of `schema` from the warehouse into `con`'s database, each as stored (in id order)."""
    con.execute("set force_compression = 'zstd'")  # as the warehouse stores FHIR JSON (dbt_project.yml)
    con.execute("set preserve_insertion_order = true")  # a scan without ORDER BY returns rows as inserted
    con.execute(f"attach '{warehouse}' as \"{warehouse.stem}\" (read_only)")
    con.execute(f"create schema {schema}")
    for relation in fhir_relations(con, warehouse.stem, schema):
        con.execute(f"create table {relation} as select {', '.join(RESOURCE_COLUMNS)} "
                    f"from \"{warehouse.stem}\".{relation}")
    con.execute(f'detach "{warehouse.stem}"')


def _copy_file(source: Path, target: Path) -> None:
    """A view's own database file, as dbt left it: closed, so checkpointed (no write-ahead log to carry along)."""
    if not source.is_file():
        raise MissingInputError(f"{source} does not exist: run `dbt build --select fhir` (it builds the view's models "
                                "into that file)")
    if Path(f"{source}.wal").exists():
        raise MissingInputError(f"{source}.wal exists: the file is open for writing, or was not closed; run the view's "
                                "dbt build again")
    shutil.copyfile(source, target)


def fhir_relations(con: duckdb.DuckDBPyConnection, catalog: str, schema: str = EHRSQL_ALIGNED_VIEW.schema) -> list[str]:
    """The resource tables of a FHIR view's schema in a database (`catalog`) of `con`, checked for the expected
    columns, in name order."""
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
    """References (`"reference": "<Type>/<id>"` anywhere in a resource) that name no resource of the build: how many,
    and the first `shown` by (resource type, id, reference). Each distinct reference is looked up once, with its count
    (joining every reference with every resource spilled to disk: on the x100 scale-up's 113 M references 86 s, this
    way 41 s); their referrers are looked for only when there are dangling references (a second pass)."""
    refs = "select resource_type, id, unnest(json_extract_string(resource, '$..reference')) as reference from resources"
    con.execute(f"""
        create temp table dangling as
        with referenced as (select reference, count(*) as occurrences from ({refs}) group by reference)
        select referenced.* from referenced
        anti join resources as target
            on target.resource_type = split_part(referenced.reference, '/', 1)
           and target.id = split_part(referenced.reference, '/', 2)
    """)
    count = con.execute("select coalesce(sum(occurrences), 0) from dangling").fetchone()[0]
    examples = [f"{kind}/{id_} -> {reference}" for kind, id_, reference in con.execute(
        f"select * from ({refs}) where reference in (select reference from dangling) order by all limit ?",
        [shown]).fetchall()] if count else []
    con.execute("drop table dangling")
    return int(count), examples


def _stream(result: duckdb.DuckDBPyConnection):
    while batch := result.fetchmany(_BATCH):
        for (text,) in batch:
            yield text


def _write_ndjson(con: duckdb.DuckDBPyConnection, resource_type: str, path: Path, relations: list[str]) -> None:
    """One resource per line, table after table each in its stored order, gzip without a name or a timestamp; checks
    that each table is in id order. Streamed in record batches (a view's largest type is gigabytes of text), each
    written as the one buffer Arrow keeps its strings in: DuckDB appends the newline, Python never touches a line.

    ISA-L's deflate (python-isal) at level 1: ~7x faster than zlib's level 1 on FHIR JSON, and a smaller file. Its
    output depends only on the input, the write sizes (whole batches of _NDJSON_BATCH rows, cut into _GZIP_BLOCK
    blocks) and the library's version (not on the CPU among x86-64 ones with SSE4.2, nor on COMPRESS_THREADS), so
    equal builds on equal installs give equal files; any gzip reader reads them (one gzip member, no name, mtime 0)."""
    with igzip_threaded.open(path, "wb", compresslevel=1, threads=COMPRESS_THREADS, block_size=_GZIP_BLOCK) as out:
        for relation in relations:
            result = con.execute(f"select id, resource::varchar || chr(10) from {relation} where resource_type = ?",
                                 [resource_type])  # in insertion order (preserve_insertion_order, DuckDB's default)
            order = _IdOrder(relation)
            for batch in result.to_arrow_reader(_NDJSON_BATCH):
                order.check(batch.column(0))
                out.write(_string_bytes(batch.column(1)))


class _IdOrder:
    """Checks, batch by batch, that the ids of a relation's rows are in (non-decreasing) id order."""

    def __init__(self, relation: str):
        self.relation = relation
        self.row = 0  # rows seen
        self.last: str | None = None  # the previous batch's last id

    def check(self, ids: pa.Array) -> None:
        if not len(ids):
            return
        back = pc.less(ids.slice(1), ids.slice(0, len(ids) - 1)).fill_null(False).to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(back) + 1 + self.row  # each row whose id is below its predecessor's
        if self.last is not None and ids[0].as_py() < self.last:
            rows = np.concatenate([[self.row], rows])
        if len(rows):
            raise ValueError(
                f"{self.relation}: its rows are not in id order (row {int(rows[0])} comes before the one above it); "
                "a FHIR model must end with `from {{ fhir_rows_in_id_order(...) }}` (dbt_project/macros/fhir_ids.sql)")
        self.row += len(ids)
        self.last = ids[-1].as_py()


_NDJSON_BATCH = 25_000  # rows: ~25 MB of FHIR JSON per write (100,000 held ~100 MiB more at the peak, no faster)
# gzip compression off the thread that reads the resources: threads compress blocks of _GZIP_BLOCK bytes, each with
# the previous block's last 32 KiB as its dictionary, so the file depends on the bytes and the block size only (the
# same with 1 or 2 threads). On the x100 scale-up's MedicationAdministration (5.7 M resources): 8.7-9.3 s instead
# of 11.3-12.4 s, the same CPU time
COMPRESS_THREADS = 2
_GZIP_BLOCK = 1 << 20


def _string_bytes(strings: pa.Array) -> memoryview:
    """The concatenated bytes of an Arrow string array without nulls (zero-copy: its data buffer between the first
    and the last offset)."""
    if strings.null_count:
        raise ValueError("a FHIR resource is NULL; every resource table row must hold a resource")
    _, offsets_buffer, data = strings.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64 if pa.types.is_large_string(strings.type) else np.int32)
    first, last = int(offsets[strings.offset]), int(offsets[strings.offset + len(strings)])
    return memoryview(data)[first:last] if data is not None else memoryview(b"")
