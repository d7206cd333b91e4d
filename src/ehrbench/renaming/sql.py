"""Rewriting SQL written for a source schema so it runs on the renamed schema (gold SQL of the `renamed`
and `renamed_random` profiles).

`rename_sql` parses with sqlglot, resolves every table and column reference scope by scope (aliases,
derived tables such as `( SELECT ... ) AS T1`, CTEs, correlated subqueries), and renames the identifiers;
string literals compared with a column that holds table names are renamed too. The renamed tokens are put
back into the original text at the positions sqlglot parsed them from, and nothing else changes: sqlglot's
generator would upper-case `current_time`, which EHRSQL's scorer replaces case-sensitively (so the query
would silently run at the real current time), and would rewrite `x IS NOT NULL` to `NOT x IS NULL`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from ehrbench.ehrsql.scoring import VITAL_RANGES
from ehrbench.renaming.schema_rename import SchemaRename, TableRename, published_rename

ValueColumns = dict[tuple[str, str], dict[str, str]]

# EHRSQL gold SQL compares vitals with `<vital>_lower` / `<vital>_upper`, replaced only at scoring time.
EHRSQL_PLACEHOLDERS = frozenset(
    f"{vital.replace(' ', '_')}_{bound}" for vital in VITAL_RANGES for bound in ("lower", "upper")
)

# Columns whose values are table names, in the EHRSQL-2024 (source) names of the published map.
TABLE_NAME_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "mimic_iv": (("cost", "event_type"), ("d_items", "linksto")),
    "eicu": (("cost", "eventtype"),),
}


def table_name_value_columns(rename: SchemaRename, published: SchemaRename | None = None) -> ValueColumns:
    """`value_columns` for `rename_sql`: the columns that hold table names, each mapping the source table
    names to `rename`'s targets.

    `rename` may start from the EHRSQL-2024 schema (the published map, or it composed with a draw) or from
    the renamed schema (a random draw); `published` defaults to the published map of its database."""
    if rename.database not in TABLE_NAME_COLUMNS:
        raise ValueError(f"no columns holding table names are known for database {rename.database!r}")
    published = published or published_rename(rename.database)
    sources = {table.source for table in rename.tables}
    locations = TABLE_NAME_COLUMNS[rename.database]
    if sources == {table.source for table in published.tables}:
        columns = locations
    elif sources == {table.target for table in published.tables}:
        columns = tuple(
            (published.table(table).target, published.table(table).column(column)) for table, column in locations
        )
    else:
        raise ValueError(
            f"the {rename.database!r} rename starts neither from the published source tables nor from its targets"
        )
    return {column: rename.table_name_values() for column in columns}


def rename_sql(
    sql: str,
    rename: SchemaRename,
    *,
    dialect: str = "sqlite",
    value_columns: ValueColumns | None = None,
    placeholders: Collection[str] = EHRSQL_PLACEHOLDERS,
) -> str:
    """`sql` (a query over `rename`'s source schema) rewritten for its target schema.

    `value_columns` maps (source table, source column) to {old literal: new literal}: string literals
    compared with that column by `=`, `!=` or `IN (...)` are replaced. Unqualified names in `placeholders`
    that no table in scope has are left alone. Only the renamed tokens change in the text; a new name is
    quoted only if the old one was (or `dialect` needs it). Names are matched case-insensitively, as SQLite
    and DuckDB do. An unknown table or column raises ValueError."""
    try:
        query = sqlglot.parse_one(sql, read=dialect)
    except SqlglotError as err:
        raise ValueError(f"cannot parse the query as {dialect}: {err}") from err
    if not isinstance(query, exp.Query):
        raise ValueError(f"only queries can be renamed, not {query.key.upper()} statements")

    renamer = _QueryRenamer(rename, value_columns or {}, placeholders)
    try:
        renamer.collect(query)
    except SqlglotError as err:
        raise ValueError(f"cannot resolve the query's scopes: {err}") from err

    return _splice(sql, renamer.edits.values(), dialect)


@dataclass(frozen=True)
class _Resolved:
    """A column reference after the rename; `origin` is the (source table, source column) it reads, if known."""

    name: str
    origin: tuple[str, str] | None = None


class _QueryRenamer:
    """Collects the identifier and literal edits of one query; `edits` maps node id → (node, new text)."""

    def __init__(self, rename: SchemaRename, value_columns: ValueColumns, placeholders: Collection[str]):
        self._rename = rename
        self._value_columns = {
            (table.lower(), column.lower()): mapping for (table, column), mapping in value_columns.items()
        }
        self._placeholders = {name.lower() for name in placeholders}
        self._resolved: dict[int, _Resolved | None] = {}
        self.edits: dict[int, tuple[exp.Identifier | exp.Literal, str]] = {}

    def collect(self, query: exp.Query) -> None:
        for scope in traverse_scope(query):
            for table in scope.tables:
                self._rename_table(scope, table)
            for node in scope.walk():
                if type(node) is exp.Column:
                    self._resolve(scope, node)
                elif isinstance(node, exp.Join) and node.args.get("using"):
                    self._rename_using(scope, node)
                elif self._value_columns and isinstance(node, (exp.EQ, exp.NEQ, exp.In)):
                    self._rename_values(scope, node)

    # -- edits

    def _rename_identifier(self, identifier: exp.Identifier, new: str) -> None:
        if identifier.name.lower() != new.lower():
            self.edits[id(identifier)] = (identifier, new)

    def _table(self, name: str) -> TableRename:
        if not self._rename.has_table(name.lower()):
            raise ValueError(f"unknown table {name!r}: the {self._rename.database} rename has no such table")
        return self._rename.table(name.lower())

    def _rename_table(self, scope: Scope, table: exp.Table) -> None:
        if not isinstance(table.this, exp.Identifier):
            return
        is_cte = not table.db and table.name.lower() in {name.lower() for name in scope.cte_sources}
        if not is_cte:
            self._rename_identifier(table.this, self._table(table.name).target)

    def _rename_using(self, scope: Scope, join: exp.Join) -> None:
        """`JOIN t USING (c)`: `c` is named as in the joined source (join keys share their new name)."""
        source = _find_source(scope, join.this.alias_or_name)
        for identifier in join.args["using"]:
            resolved = self._in_source(source, identifier.name) if source is not None else None
            if resolved is None:
                raise ValueError(f"unknown column {identifier.name!r} in JOIN {join.this.alias_or_name} USING")
            self._rename_identifier(identifier, resolved.name)

    def _rename_values(self, scope: Scope, node: exp.EQ | exp.NEQ | exp.In) -> None:
        if isinstance(node, exp.In):
            column, literals = node.this, node.expressions
        elif isinstance(node.left, exp.Column):
            column, literals = node.left, [node.right]
        else:
            column, literals = node.right, [node.left]
        if not isinstance(column, exp.Column) or isinstance(column.this, exp.Star):
            return
        resolved = self._resolve(scope, column)
        mapping = self._value_columns.get(resolved.origin) if resolved and resolved.origin else None
        for literal in literals if mapping else []:
            if isinstance(literal, exp.Literal) and literal.is_string and literal.this in mapping:
                self.edits[id(literal)] = (literal, mapping[literal.this])

    # -- resolution

    def _resolve(self, scope: Scope, column: exp.Column) -> _Resolved | None:
        """Resolve (once) a column of `scope` and record its edits; None for a star or a placeholder."""
        if id(column) not in self._resolved:
            self._resolved[id(column)] = self._resolve_uncached(scope, column)
        return self._resolved[id(column)]

    def _resolve_uncached(self, scope: Scope, column: exp.Column) -> _Resolved | None:
        qualifier = column.table
        if not qualifier:
            resolved = self._resolve_unqualified(scope, column)
        else:
            source = _find_source(scope, qualifier)
            if source is None:
                raise ValueError(f"{column.sql()} refers to {qualifier!r}, which is no table or alias in scope")
            if isinstance(source, exp.Table) and not source.alias:  # qualified by the table's own name
                self._rename_identifier(column.args["table"], self._table(source.name).target)
            if isinstance(column.this, exp.Star):
                return None
            resolved = self._in_source(source, column.name)
            if resolved is None:
                raise ValueError(f"unknown column {qualifier}.{column.name}")
        if resolved is not None:
            self._rename_identifier(column.this, resolved.name)
        return resolved

    def _resolve_unqualified(self, scope: Scope, column: exp.Column) -> _Resolved | None:
        name = column.name
        if isinstance(scope.expression, exp.SetOperation):  # ORDER BY of a UNION names its output columns
            resolved = self._output(scope, name)
            if resolved is None:
                raise ValueError(f"unknown column {name!r}: not an output of the set operation")
            return resolved

        aliases = _aliases(scope)
        order = column.find_ancestor(exp.Order, exp.Select)
        if name.lower() in aliases and isinstance(order, exp.Order) and order.parent is scope.expression:
            return _Resolved(name)  # SQLite resolves ORDER BY names to result aliases first

        current: Scope | None = scope
        while current is not None:  # then the FROM sources, then (correlated) outer queries
            found = [r for _, source in current.selected_sources.values() if (r := self._in_source(source, name))]
            if len({r.name for r in found}) > 1:
                raise ValueError(f"ambiguous column {name!r}: it is renamed differently in the tables in scope")
            if found:
                return found[0]
            if current is scope and name.lower() in aliases:
                return _Resolved(name)
            current = current.parent
        if name.lower() in self._placeholders:
            return None
        raise ValueError(f"unknown column {name!r}: no table in scope has it")

    def _in_source(self, source: exp.Table | Scope, name: str) -> _Resolved | None:
        """Column `name` of a FROM source (a table or a subquery/CTE), or None if it has no such column."""
        if isinstance(source, exp.Table):
            table = self._table(source.name)
            if not table.has_column(name.lower()):
                return None
            return _Resolved(table.column(name.lower()), (table.source, name.lower()))
        return self._output(source, name)

    def _output(self, scope: Scope, name: str) -> _Resolved | None:
        """Output column `name` of a subquery or CTE after the rename, or None if it has none."""
        if isinstance(scope.expression, exp.SetOperation):
            return self._output(scope.set_operation_scopes[0], name)
        if scope.outer_columns:  # `AS t(a, b)` fixes the output names
            return _Resolved(name) if name.lower() in {c.lower() for c in scope.outer_columns} else None
        query = scope.expression
        if not isinstance(query, exp.Select):
            return None
        for projection in query.expressions:
            if isinstance(projection, exp.Alias):
                if projection.alias.lower() == name.lower():
                    inner = projection.this
                    resolved = self._resolve(scope, inner) if type(inner) is exp.Column else None
                    return _Resolved(name, resolved.origin if resolved else None)
            elif type(projection) is exp.Column and not isinstance(projection.this, exp.Star):
                if projection.name.lower() == name.lower():
                    return self._resolve(scope, projection) or _Resolved(name)
            elif isinstance(projection, exp.Star) or type(projection) is exp.Column:  # `*` or `t.*`
                for source in _star_sources(scope, projection):
                    if resolved := self._in_source(source, name):
                        return resolved
        return None


def _find_source(scope: Scope, qualifier: str) -> exp.Table | Scope | None:
    """The FROM source a qualifier names, looking outwards for correlated subqueries."""
    current: Scope | None = scope
    while current is not None:
        for name, (_, source) in current.selected_sources.items():
            if name.lower() == qualifier.lower():
                return source
        current = current.parent
    return None


def _aliases(scope: Scope) -> set[str]:
    query = scope.expression
    if not isinstance(query, exp.Select):
        return set()
    return {p.alias.lower() for p in query.expressions if isinstance(p, exp.Alias)}


def _star_sources(scope: Scope, star: exp.Star | exp.Column) -> list[exp.Table | Scope]:
    if isinstance(star, exp.Column) and star.table:
        source = _find_source(scope, star.table)
        return [] if source is None else [source]
    return [source for _, source in scope.selected_sources.values()]


def _splice(sql: str, edits: Iterable[tuple[exp.Identifier | exp.Literal, str]], dialect: str) -> str:
    """`sql` with each edited token replaced in place, everything else byte for byte."""
    texts: dict[tuple[bool, bool, str], str] = {}  # generating a token is slow and names repeat
    replacements = []
    for node, new in edits:
        if "start" not in node.meta:
            raise ValueError(f"sqlglot gave no position for {node.sql()!r}, so it cannot be renamed in place")
        is_identifier = isinstance(node, exp.Identifier)
        key = (is_identifier, bool(node.args.get("quoted")), new)
        if key not in texts:
            token = exp.Identifier(this=new, quoted=key[1]) if is_identifier else exp.Literal.string(new)
            texts[key] = token.sql(dialect=dialect)
        replacements.append((node.meta["start"], node.meta["end"] + 1, texts[key]))
    pieces, position = [], 0
    for start, end, text in sorted(replacements):
        pieces += [sql[position:start], text]
        position = end
    return "".join([*pieces, sql[position:]])
