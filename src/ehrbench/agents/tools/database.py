"""EHR-ChatQA's database tools over one agent-facing database, DuckDB or SQLite: table_search, column_search,
sql_execute, value_substring_search, value_similarity_search and, when a provider is configured, web_search — with
the published names, arguments, descriptions and result texts (`ehrchatqa`; docs/benchmarks.md#agent-tools).

Every statement, the agent's and the tools' own, runs through one SqlSandbox (read-only, no files, timeouts). The
tools' own statements embed the model's table and column names only after matching them against the catalog, and
its values only as quoted SQL string literals, so what the model types cannot change a statement's meaning.
"""

from __future__ import annotations

from pathlib import Path

from ehrbench.agents.sandbox import QueryResult, SqlError, SqlSandbox
from ehrbench.agents.tools.base import Tool, ToolError, bounded_count, dispatch, truncated
from ehrbench.agents.tools.catalog import read_catalog, sql_identifier, sql_literal
from ehrbench.agents.tools.ehrchatqa import (
    DEFAULT_K,
    DEFAULT_TIMEOUT_S,
    SAMPLE_ROWS,
    SIMILARITY_COLUMNS,
    SPECS,
    TOOL_ORDER,
    TableShape,
    ddl_text,
    rows_text,
    sample_text,
    similarity_spec,
    values_text,
)
from ehrbench.agents.tools.similarity import ValueSimilarity
from ehrbench.agents.tools.web_search import DISABLED, WebSearchError, WebSearchProvider, web_search_tool
from ehrbench.llm.tool_chat import ToolCall, ToolSpec

__all__ = ["ALL_TOOLS", "DatabaseTools", "sql_identifier", "sql_literal"]

ALL_TOOLS = TOOL_ORDER
# The most values one value search returns (the published searches take any k; a bound keeps a reply readable).
VALUE_SEARCH_MAX_K = 1000
# The most distinct values value_similarity_search ranks; a column with more is ranked on its first ones (in value
# order) and the answer says so.
MAX_CANDIDATES = 500_000
CANDIDATE_BYTES = 64 * 1024 * 1024  # room for them (the tool's own statement; agents' results stop at 8 MB)
# execute_rows (the final answer's SQL) returns up to this many rows: answers are scored on all their rows.
ANSWER_MAX_ROWS = 10_000
_TEXT_TYPES = ("CHAR", "TEXT", "CLOB", "STRING")

_CATALOGS: dict[tuple[str, int, int], dict[str, TableShape]] = {}  # (path, mtime, size) -> catalog


class DatabaseTools:
    """The EHR-ChatQA tools over `database` (a toolbox: `specs`, `call`). Use as a context manager: it opens one
    SqlSandbox (a confined worker process; `isolation` as ehrbench.agents.sandbox.isolation returns, default
    bubblewrap).

    `tools` chooses the database tools offered (default all five, in the published order); `web_search` adds that
    tool over the provider given. `max_rows` caps sql_execute's k (published: 100); `timeout_s` caps a statement's
    seconds (sql_execute's `timeout` may ask for less). `similarity` ranks value_similarity_search's values (default:
    lexical); `similarity_columns` are the columns it searches (default: the published ones when the database is
    one of EHR-ChatQA's renamed schemas, else every text column). `max_chars` cuts long results (default: none, as
    published)."""

    def __init__(self, database: Path, *, max_rows: int = 100, timeout_s: float = float(DEFAULT_TIMEOUT_S),
                 similarity: ValueSimilarity | None = None, tools: tuple[str, ...] = ALL_TOOLS,
                 max_chars: int | None = None, isolation: str | None = None,
                 similarity_columns: dict[str, tuple[str, ...]] | None = None,
                 web_search: WebSearchProvider | None = None):
        if unknown := [name for name in tools if name not in TOOL_ORDER]:
            raise ValueError(f"unknown database tool(s) {unknown}; the tools are {list(TOOL_ORDER)}")
        self.database = Path(database)
        self.max_rows = max_rows
        self.timeout_s = timeout_s
        self.max_chars = max_chars
        self.similarity = similarity if similarity is not None else ValueSimilarity()
        self.web_search = web_search
        self._offered = tools
        self._similarity_columns = similarity_columns
        self._sandbox = SqlSandbox(self.database, timeout_s=timeout_s, max_rows=max_rows, isolation=isolation)
        self._tables: dict[str, TableShape] = {}
        self._candidates: dict[tuple[str, str], tuple[list[str], bool]] = {}  # (table, column) -> values, capped
        self._tools: dict[str, Tool] = {}
        self.specs: list[ToolSpec] = []
        self._offer()  # final once the catalog is read: value_similarity_search's description lists its columns

    def __enter__(self) -> DatabaseTools:
        self._sandbox.__enter__()
        try:
            # a database file of a build never changes: its catalog is read once per process
            stat = self.database.stat()
            key = (str(self.database), stat.st_mtime_ns, stat.st_size)
            if key not in _CATALOGS:
                _CATALOGS[key] = read_catalog(lambda sql: self._run(sql, None), self.engine)
            self._tables = _CATALOGS[key]
            if self._similarity_columns is None:
                self._similarity_columns = self._searchable_columns()
            self._offer()
        except BaseException:
            self._sandbox.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._sandbox.__exit__(*exc)

    @property
    def engine(self) -> str:
        return self._sandbox.engine

    @property
    def tables(self) -> list[str]:
        return list(self._tables)

    @property
    def catalog(self) -> dict[str, list[tuple[str, str]]]:
        """Table → its (column, type) pairs in catalog order, tables by name."""
        return {name: [(column, kind) for column, kind, _ in table.columns] for name, table in self._tables.items()}

    @property
    def value_search(self) -> str | None:
        """How value_similarity_search ranks (ValueSimilarity.mode), None when it is not offered."""
        return self.similarity.mode if "value_similarity_search" in self._tools else None

    @property
    def web_search_name(self) -> str:
        """The web search provider offered, or `disabled`."""
        return self.web_search.name if self.web_search is not None else DISABLED

    def call(self, call: ToolCall) -> str:
        return dispatch(self._tools, call, expected=(SqlError, WebSearchError))

    def execute_rows(self, sql: str, max_rows: int = ANSWER_MAX_ROWS) -> QueryResult:
        """Run the final answer's SQL in the sandbox (raises SqlError); `truncated` tells if it had more rows."""
        return self._run(sql, max_rows)

    # --- the tools ---------------------------------------------------------------------------------------------

    def table_search(self, tool_input: str = "") -> str:  # `tool_input`: the published argument, unused
        return ", ".join(self._tables)

    def column_search(self, table_names: str) -> str:
        parts = []
        for name in table_names.split(","):
            table = self._find_table(name.strip())
            if table is None:
                parts.append(f"Error: table_names {{'{name.strip()}'}} not found in database")
                continue
            sample = self._run(f"SELECT * FROM {sql_identifier(table.name)} LIMIT {SAMPLE_ROWS}", SAMPLE_ROWS)
            parts.append(ddl_text(table) + sample_text(table.name, sample.columns, sample.rows))
        return self._cut("\n\n\n".join(parts), "sample rows are cut; ask for fewer tables at a time")

    def sql_execute(self, query: str, k: int = DEFAULT_K, timeout: int = DEFAULT_TIMEOUT_S) -> str:
        k, _ = bounded_count("k", k, self.max_rows)
        if timeout < 1:
            raise ToolError(f"timeout must be a number of seconds of at least 1, got {timeout}")
        seconds = min(float(timeout), self.timeout_s)
        result = self._run(query, k, timeout_s=seconds)
        text = rows_text(result.rows)
        shown = len(result.rows)
        if result.truncated or result.bytes_capped:
            total = self._count(query, seconds)
            text += (f"\n\nNote: There are {total - shown} results not shown (out of {total} total results)."
                     if total is not None else f"\n\nNote: There are more results not shown (the first {shown} "
                                               "are shown).")
        if result.limits_note:
            text += f"\n\nNote: {result.limits_note}; select fewer or shorter values (substr, aggregates)."
        return self._cut(text, "select fewer columns or rows (WHERE, LIMIT, aggregates) or lower k")

    def value_substring_search(self, table: str, column: str, value: str, k: int = DEFAULT_K) -> str:
        # published: `column LIKE '%value%'` (so % and _ in the value are wildcards), case-insensitive
        found = self._find_table(table)
        if found is None:
            raise ToolError(f"unknown table {table!r}; the tables are: {', '.join(self._tables)}")
        name = self._column(found, column)
        k, _ = bounded_count("k", k, VALUE_SEARCH_MAX_K)
        stored = sql_identifier(name)
        like = "ILIKE" if self.engine == "duckdb" else "LIKE"  # SQLite's LIKE ignores ASCII case already
        sql = (f"SELECT DISTINCT {stored} FROM {sql_identifier(found.name)} "
               f"WHERE CAST({stored} AS TEXT) {like} {sql_literal('%' + value + '%')} ORDER BY {stored} LIMIT {k}")
        values = [row[0] for row in self._run(sql, k).rows if row[0] is not None]
        if not values:
            return f"No values in {table}.{column} contain '{value}'."
        return self._cut(f"Values in {table}.{column} containing '{value}': {values_text(values)}.", "lower k")

    def value_similarity_search(self, table: str, column: str, value: str, k: int = DEFAULT_K) -> str:
        # published: the value lower-cased, the k nearest values among the column's (only supported columns have any)
        k, _ = bounded_count("k", k, VALUE_SEARCH_MAX_K)
        value = value.lower()
        if column not in (self._similarity_columns or {}).get(table, ()):
            return f"No matches found in {table}.{column} for '{value}'."
        candidates, capped = self._distinct_values(table, column)
        ranked = [candidate for candidate, _ in self.similarity.rank(value, candidates, k)]
        if not ranked:
            return f"No matches found in {table}.{column} for '{value}'."
        text = (f"I found one close match in {table}.{column}: '{ranked[0]}'." if len(ranked) == 1
                else f"I found close matches in {table}.{column}: {ranked!r}.")
        if capped:
            text += (f"\n\nNote: the column has more than {MAX_CANDIDATES} distinct values; only the first "
                     f"{MAX_CANDIDATES} in value order were compared.")
        return self._cut(text, "lower k")

    # --- catalog and validation --------------------------------------------------------------------------------

    def _offer(self) -> None:
        specs = {**SPECS, "value_similarity_search": similarity_spec(self._similarity_columns or {},
                                                                      embedding=self.similarity.embedder is not None)}
        runners = {"table_search": self.table_search, "column_search": self.column_search,
                   "sql_execute": self.sql_execute, "value_substring_search": self.value_substring_search,
                   "value_similarity_search": self.value_similarity_search}
        self._tools = {name: Tool(specs[name], runners[name]) for name in TOOL_ORDER if name in self._offered}
        if self.web_search is not None:
            self._tools["web_search"] = web_search_tool(self.web_search)
        self.specs = [tool.spec for tool in self._tools.values()]

    def _searchable_columns(self) -> dict[str, tuple[str, ...]]:
        """The published columns of the EHR-ChatQA database whose tables this is, else every text column."""
        for columns in SIMILARITY_COLUMNS.values():
            if all(table in self._tables and set(names) <= {c for c, _, _ in self._tables[table].columns}
                   for table, names in columns.items()):
                return columns
        searchable = {name: tuple(column for column, kind, _ in table.columns
                                  if any(text in kind.upper() for text in _TEXT_TYPES))
                      for name, table in self._tables.items()}
        return {name: columns for name, columns in searchable.items() if columns}

    def _find_table(self, name: str) -> TableShape | None:
        """The catalog's table for `name` (exact, else the one case-insensitive match, as SQLite resolves names)."""
        if name in self._tables:
            return self._tables[name]
        matches = [table for key, table in self._tables.items() if key.lower() == name.strip().lower()]
        return matches[0] if len(matches) == 1 else None

    @staticmethod
    def _column(table: TableShape, name: str) -> str:
        names = [column for column, _, _ in table.columns]
        if name in names:
            return name
        matches = [column for column in names if column.lower() == name.strip().lower()]
        if len(matches) == 1:
            return matches[0]
        raise ToolError(f"unknown column {name!r} in table {table.name}; its columns are: {', '.join(names)}")

    def _count(self, query: str, seconds: float) -> int | None:
        """How many rows `query` returns, for the published "N results not shown" note (None when it cannot be
        counted, e.g. a PRAGMA)."""
        body = query.strip().rstrip(";").strip()
        try:  # the line breaks keep a trailing -- comment from swallowing the closing parenthesis
            rows = self._run(f"SELECT count(*) FROM (\n{body}\n) AS counted_rows", 1, timeout_s=seconds).rows
        except SqlError:
            return None
        return int(rows[0][0]) if rows else None

    def _distinct_values(self, table: str, column: str) -> tuple[list[str], bool]:
        key = (table, column)
        if key not in self._candidates:
            stored = sql_identifier(column)
            result = self._run(f"SELECT DISTINCT CAST({stored} AS TEXT) AS stored_value FROM {sql_identifier(table)} "
                               f"WHERE {stored} IS NOT NULL ORDER BY stored_value LIMIT {MAX_CANDIDATES + 1}",
                               MAX_CANDIDATES, max_bytes=CANDIDATE_BYTES)
            self._candidates[key] = ([row[0] for row in result.rows], result.truncated or result.bytes_capped)
        return self._candidates[key]

    def _cut(self, text: str, how_to_narrow: str) -> str:
        return truncated(text, self.max_chars, how_to_narrow) if self.max_chars else text

    def _run(self, sql: str, max_rows: int | None, max_bytes: int | None = None,
             timeout_s: float | None = None) -> QueryResult:
        """One statement through the sandbox with its own row cap (None: no practical cap, for the catalog) and,
        for the tools' own statements, its own size cap; `timeout_s` shortens the toolbox's timeout."""
        previous = self._sandbox.max_rows, self._sandbox.max_bytes, self._sandbox.timeout_s
        self._sandbox.max_rows = max_rows if max_rows is not None else 1_000_000
        self._sandbox.max_bytes = max_bytes or previous[1]
        self._sandbox.timeout_s = min(timeout_s, previous[2]) if timeout_s else previous[2]
        try:
            return self._sandbox.execute(sql)
        finally:
            self._sandbox.max_rows, self._sandbox.max_bytes, self._sandbox.timeout_s = previous
