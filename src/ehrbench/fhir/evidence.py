"""The rows a gold SQL query reads (docs/benchmarks.md#fhir-agentbench-data-and-ground-truth): rewrite the query so
that it returns the row ids of the patient
data it answers from, keeping WHERE, ORDER BY and LIMIT, so that the rows can be mapped to FHIR resources.

Which rows are "the evidence": the rows of the patient-data tables in the FROM/JOIN of the SELECT that produces
the answer. Subqueries in the WHERE of such a SELECT only filter (e.g. `hadm_id IN (SELECT … FROM admissions …)`)
and are not evidence. A SELECT that reads no patient table itself (a dictionary like d_icd_diagnoses, a derived
table, or no FROM at all, as in `SELECT (SELECT …) - (SELECT …)`) passes the question on to the SELECTs it is
made of: its derived tables (whose row ids are threaded through to the outer query, so the outer filters still
apply), the scalar subqueries it projects and the subqueries of its WHERE. An aggregating SELECT reads all the
rows it aggregates, so its GROUP BY, HAVING, ORDER BY and LIMIT are dropped; otherwise they are kept (the "last"
lab value is one row).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

# The tables of the EHRSQL MIMIC-IV schema that hold patient data (every other table is a dictionary or is
# synthetic); each row has a `row_id`.
PATIENT_TABLES = frozenset({
    "patients", "admissions", "icustays", "transfers", "diagnoses_icd", "procedures_icd", "labevents",
    "prescriptions", "cost", "chartevents", "inputevents", "outputevents", "microbiologyevents"})
ROW_ID = "row_id"
_EVIDENCE = "__evidence_"


class UnsupportedQuery(ValueError):
    """A gold query whose evidence rows cannot be isolated by this rewrite; the message is the reason."""


@dataclass(frozen=True)
class EvidenceQuery:
    sql: str  # SQLite; one row-id column per entry of `tables`
    tables: tuple[str, ...]  # the patient table each column's row ids belong to


def evidence_queries(sql: str, dialect: str = "sqlite") -> list[EvidenceQuery]:
    """The queries returning the row ids that `sql` answers from (none if it reads no patient data)."""
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except sqlglot.errors.ParseError as exc:
        raise UnsupportedQuery(f"SQL does not parse: {str(exc).splitlines()[0]}") from None
    queries: list[EvidenceQuery] = []
    _collect(tree, queries, dialect)
    return queries


def projected_columns(sql: str, table: str, dialect: str = "sqlite") -> set[str]:
    """The columns of `table` (qualified by its name or an alias of it) that some SELECT list of `sql` returns or
    computes with: what the question reads, as opposed to what it filters on."""
    tree = sqlglot.parse_one(sql, read=dialect)
    names = {table} | {t.alias_or_name for t in tree.find_all(exp.Table) if t.name == table}
    return {column.name for select in tree.find_all(exp.Select) for expression in select.expressions
            for column in expression.find_all(exp.Column) if column.table in names}


def _collect(node: exp.Expression, queries: list[EvidenceQuery], dialect: str) -> None:
    if isinstance(node, exp.Subquery):
        node = node.this
    if isinstance(node, exp.SetOperation):
        _collect(node.left, queries, dialect)
        _collect(node.right, queries, dialect)
        return
    if not isinstance(node, exp.Select):
        raise UnsupportedQuery(f"unexpected query node {type(node).__name__}")
    select = node.copy()
    grouped = _grouped_source(select)
    if grouped is not None:
        queries.append(EvidenceQuery(*_rows_of_kept_groups(select, grouped, dialect)))
        return
    columns = _expose_evidence(select)
    if columns:
        tables = tuple(table for _, table in columns)
        select.set("expressions", [expression.as_(f"{_EVIDENCE}{i}") for i, (expression, _) in enumerate(columns)])
        queries.append(EvidenceQuery(select.sql(dialect=dialect), tables))
        return
    for child in _child_selects(node, parts=("expressions", "where")):
        _collect(child, queries, dialect)


def _expose_evidence(select: exp.Select) -> list[tuple[exp.Expression, str]]:
    """Make `select` (in place) read only its evidence rows and return, per evidence source, the expression of its
    row ids and its table; [] when it reads no patient table directly or through a derived table."""
    columns: list[tuple[exp.Expression, str]] = []
    for source in _sources(select):
        if isinstance(source, exp.Table) and source.name in PATIENT_TABLES:
            columns.append((exp.column(ROW_ID, table=source.alias_or_name), source.name))
        elif isinstance(source, exp.Subquery) and isinstance(source.this, exp.Select):
            inner = source.this
            aggregates = _aggregates(inner)
            inner_columns = _expose_evidence(inner)
            if not inner_columns:
                continue
            if aggregates:  # its rows are groups: row ids cannot pass through it
                raise UnsupportedQuery("a derived table aggregates patient rows and is not the only source, or "
                                       "its rows come from further derived tables")
            offset = sum(1 for e in inner.expressions if e.alias.startswith(_EVIDENCE))
            for i, (expression, table) in enumerate(inner_columns):
                name = f"{_EVIDENCE}{offset + i}"
                inner.append("expressions", expression.as_(name))
                columns.append((exp.column(name, table=source.alias_or_name), table))
        elif isinstance(source, exp.Subquery):
            raise UnsupportedQuery("a derived table is a set operation")
    if columns and _aggregates(select):
        for part in ("group", "having", "order", "limit", "offset", "distinct"):
            select.set(part, None)
    elif columns:
        select.set("distinct", None)
    return columns


def _grouped_source(select: exp.Select) -> exp.Subquery | None:
    """The derived table of `select` when it is its only source and aggregates patient rows (e.g. counts per
    procedure code, filtered to the codes done twice, or ranked for a top 3)."""
    sources = _sources(select)
    if len(sources) != 1 or not isinstance(sources[0], exp.Subquery) or not isinstance(sources[0].this, exp.Select):
        return None
    inner = sources[0].this
    return sources[0] if _reads_patients(inner) and _aggregates(inner) else None


def _reads_patients(select: exp.Select) -> bool:
    return any(isinstance(s, exp.Table) and s.name in PATIENT_TABLES for s in _sources(select))


def _rows_of_kept_groups(outer: exp.Select, derived: exp.Subquery, dialect: str) -> tuple[str, tuple[str, ...]]:
    """The rows of the groups that the outer query keeps: the derived table's query without its aggregation,
    restricted to the group keys the outer query returns (`(k1, …) IN (SELECT keys FROM (…) WHERE <outer filter>)`)."""
    inner = derived.this
    keys = list((inner.args.get("group") or exp.Group()).expressions)
    keyed = inner.copy()
    for i, key in enumerate(keys):
        keyed.append("expressions", key.copy().as_(f"__key_{i}"))
    chosen = outer.copy()
    chosen_source = _sources(chosen)[0]
    chosen_source.set("this", keyed)
    alias = derived.alias_or_name
    chosen.set("expressions",
               [exp.column(f"__key_{i}", table=alias) for i in range(len(keys))] or [exp.Literal.number(1)])
    chosen.set("distinct", None)

    rows = inner.copy()
    for part in ("group", "having", "order", "limit", "offset", "distinct"):
        rows.set(part, None)
    sources = [s for s in _sources(rows) if isinstance(s, exp.Table) and s.name in PATIENT_TABLES]
    rows.set("expressions", [exp.column(ROW_ID, table=s.alias_or_name).as_(f"{_EVIDENCE}{i}")
                             for i, s in enumerate(sources)])
    if not keys:
        kept = exp.Exists(this=chosen)
    else:
        target = keys[0].copy() if len(keys) == 1 else exp.Tuple(expressions=[k.copy() for k in keys])
        kept = exp.In(this=target, query=exp.Subquery(this=chosen))
    rows.where(kept, copy=False)
    return rows.sql(dialect=dialect), tuple(s.name for s in sources)


def _sources(select: exp.Select) -> list[exp.Expression]:
    """The tables and derived tables of the SELECT's own FROM and JOINs."""
    sources = []
    from_ = select.args.get("from_")
    if from_ is not None:
        sources.append(from_.this)
    sources.extend(join.this for join in select.args.get("joins") or [])
    return sources


def _aggregates(select: exp.Select) -> bool:
    if select.args.get("group"):
        return True
    return any(f.parent_select is select and not f.find_ancestor(exp.Window)
               for e in select.expressions for f in e.find_all(exp.AggFunc))


def _child_selects(select: exp.Select, parts: tuple[str, ...]) -> list[exp.Expression]:
    """The outermost subqueries in the given parts of `select` (and its derived tables)."""
    children: list[exp.Expression] = [s for s in _sources(select) if isinstance(s, exp.Subquery)]
    for part in parts:
        value = select.args.get(part)
        for expression in value if isinstance(value, list) else [value] if value is not None else []:
            children.extend(query for query in expression.find_all(exp.Select, exp.SetOperation)
                            if query.parent_select is select and not isinstance(query.parent, exp.SetOperation))
    return children
