"""EHR-ChatQA's database tools (names and arguments as in the paper, docs/benchmarks.md#agent-tools) over one
agent-facing database, DuckDB or SQLite.

Every statement, the agent's and the tools' own, runs through one SqlSandbox (read-only, no files, timeouts). The
tools' own statements embed the model's table and column names only after matching them against the catalog, and
its values only as quoted SQL string literals, so what the model types cannot change a statement's meaning.
"""

from __future__ import annotations

from pathlib import Path

from ehrbench.agents.sandbox import QueryResult, SqlError, SqlSandbox
from ehrbench.agents.tools.base import (
    DEFAULT_MAX_CHARS,
    Tool,
    ToolError,
    bounded_count,
    cell_text,
    dispatch,
    table_text,
    truncated,
)
from ehrbench.agents.tools.similarity import ValueSimilarity
from ehrbench.llm.tool_chat import ToolCall, ToolSpec

DEFAULT_K = 100
SAMPLE_ROWS = 3
# The most distinct values value_similarity_search ranks; a column with more is ranked on its first ones (in value
# order) and the answer says so.
MAX_CANDIDATES = 500_000
CANDIDATE_BYTES = 64 * 1024 * 1024  # room for them (the tool's own statement; agents' results stop at 8 MB)
# execute_rows (the final answer's SQL) returns up to this many rows: answers are scored on all their rows.
ANSWER_MAX_ROWS = 10_000

_CATALOGS: dict[tuple[str, int, int], dict[str, list[tuple[str, str]]]] = {}  # (path, mtime, size) -> catalog

_TABLE = {"type": "string", "description": "a table name, as listed by table_search"}
_COLUMN = {"type": "string", "description": "a column of that table, as listed by column_search"}
_K = {"type": "integer", "description": "the most values to return (default 100)", "default": DEFAULT_K}

SPECS = {
    "table_search": ToolSpec(
        "table_search", "List the names of all tables in the database.",
        {"type": "object", "properties": {}}),
    "column_search": ToolSpec(
        "column_search", "Show a table's columns with their types (as a CREATE TABLE statement) and 3 sample rows.",
        {"type": "object", "properties": {"table": _TABLE}, "required": ["table"]}),
    "value_substring_search": ToolSpec(
        "value_substring_search",
        "Find up to k distinct values of a column that contain the given text (case-insensitive), shortest first. "
        "Use it to learn how a value is spelled in the database before filtering on it.",
        {"type": "object", "properties": {"table": _TABLE, "column": _COLUMN,
                                          "value": {"type": "string", "description": "the text to look for"},
                                          "k": _K},
         "required": ["table", "column", "value"]}),
    "value_similarity_search": ToolSpec(
        "value_similarity_search",
        "Find up to k distinct values of a column most similar to the given text, with scores from 0 to 1 (1 = "
        "same value or a known synonym: lay terms, abbreviations, brand/generic drug names). Use it when the exact "
        "wording is unknown or misspelled.",
        {"type": "object", "properties": {"table": _TABLE, "column": _COLUMN,
                                          "value": {"type": "string", "description": "the term to match"},
                                          "k": _K},
         "required": ["table", "column", "value"]}),
    "sql_execute": ToolSpec(
        "sql_execute",
        "Run one read-only SQL statement on the database and return its first k rows (k at most 100).",
        {"type": "object", "properties": {"query": {"type": "string", "description": "one SQL statement"},
                                          "k": {"type": "integer", "description": "the most rows to return "
                                                "(default 100)", "default": DEFAULT_K}},
         "required": ["query"]}),
}
ALL_TOOLS = tuple(SPECS)


def sql_literal(text: str) -> str:
    """A SQL string literal for any text (standard quoting, the same in DuckDB and SQLite: backslashes are plain)."""
    return "'" + text.replace("'", "''") + "'"


def sql_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class DatabaseTools:
    """The EHR-ChatQA tools over `database` (a toolbox: `specs`, `call`). Use as a context manager: it opens one
    SqlSandbox (a confined worker process; `isolation` as ehrbench.agents.sandbox.isolation returns, default
    bubblewrap). `tools` chooses the tools offered (default all five); `max_rows` caps sql_execute's k."""

    def __init__(self, database: Path, *, max_rows: int = 100, timeout_s: float = 10.0,
                 similarity: ValueSimilarity | None = None, tools: tuple[str, ...] = ALL_TOOLS,
                 max_chars: int = DEFAULT_MAX_CHARS, isolation: str | None = None):
        if unknown := [name for name in tools if name not in SPECS]:
            raise ValueError(f"unknown database tool(s) {unknown}; the tools are {list(SPECS)}")
        self.database = Path(database)
        self.max_rows = max_rows
        self.max_chars = max_chars
        self._similarity = similarity
        self._sandbox = SqlSandbox(self.database, timeout_s=timeout_s, max_rows=max_rows, isolation=isolation)
        runners = {"table_search": self.table_search, "column_search": self.column_search,
                   "value_substring_search": self.value_substring_search,
                   "value_similarity_search": self.value_similarity_search, "sql_execute": self.sql_execute}
        self._tools = {name: Tool(SPECS[name], runners[name]) for name in tools}
        self.specs: list[ToolSpec] = [tool.spec for tool in self._tools.values()]
        self._columns: dict[str, list[tuple[str, str]]] = {}  # table -> (column, type), in catalog order
        self._candidates: dict[tuple[str, str], tuple[list[str], bool]] = {}  # (table, column) -> values, capped

    def __enter__(self) -> DatabaseTools:
        self._sandbox.__enter__()
        try:
            # a database file of a build never changes: its catalog is read once per process
            stat = self.database.stat()
            key = (str(self.database), stat.st_mtime_ns, stat.st_size)
            if key not in _CATALOGS:
                _CATALOGS[key] = self._read_catalog()
            self._columns = _CATALOGS[key]
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
        return list(self._columns)

    @property
    def catalog(self) -> dict[str, list[tuple[str, str]]]:
        """Table → its (column, type) pairs in catalog order, tables by name."""
        return {table: list(columns) for table, columns in self._columns.items()}

    def call(self, call: ToolCall) -> str:
        return dispatch(self._tools, call, expected=(SqlError,))

    def execute_rows(self, sql: str, max_rows: int = ANSWER_MAX_ROWS) -> QueryResult:
        """Run the final answer's SQL in the sandbox (raises SqlError); `truncated` tells if it had more rows."""
        return self._run(sql, max_rows)

    # --- the tools ---------------------------------------------------------------------------------------------

    def table_search(self) -> str:
        return f"{len(self._columns)} tables:\n" + "\n".join(self._columns)

    def column_search(self, table: str) -> str:
        table = self._table(table)
        ddl = self._ddl(table)
        sample = self._run(f"SELECT * FROM {sql_identifier(table)} LIMIT {SAMPLE_ROWS}", SAMPLE_ROWS)
        text = f"{ddl}\n\n{SAMPLE_ROWS} sample rows:\n{table_text(sample.columns, sample.rows)}"
        return truncated(text, self.max_chars, "sample rows are cut; query the columns you need with sql_execute")

    def value_substring_search(self, table: str, column: str, value: str, k: int = DEFAULT_K) -> str:
        table = self._table(table)
        column = self._column(table, column)
        k, capped = bounded_count("k", k, self.max_rows)
        if not value:
            raise ToolError("value must be a non-empty piece of text to look for")
        # instr, not LIKE: '%' and '_' in the model's text are plain characters here
        sql = (f"SELECT stored_value FROM {self._distinct_text(table, column)} "
               f"WHERE instr(lower(stored_value), lower({sql_literal(value)})) > 0 "
               f"ORDER BY length(stored_value), stored_value LIMIT {k + 1}")
        result = self._run(sql, k + 1)
        values = [row[0] for row in result.rows]
        where = f"{table}.{column}"
        if not values:
            return (f"No value of {where} contains {value!r}. Try a shorter or different part of the word, or "
                    "value_similarity_search.")
        lines = [f"{min(len(values), k)} distinct values of {where} containing {value!r} (shortest first):",
                 *map(cell_text, values[:k])]
        if len(values) > k:
            lines.append(f"[more values match; only the first {k} are shown{' (k is capped)' if capped else ''}: "
                         "search for a longer piece of text to narrow them]")
        return truncated("\n".join(lines), self.max_chars, "search for a longer piece of text or lower k")

    def value_similarity_search(self, table: str, column: str, value: str, k: int = DEFAULT_K) -> str:
        table = self._table(table)
        column = self._column(table, column)
        k, _ = bounded_count("k", k, self.max_rows)
        if not value.strip():
            raise ToolError("value must be a non-empty term to compare the stored values with")
        candidates, capped = self._distinct_values(table, column)
        similarity = self._value_similarity()
        ranked = similarity.rank(value, candidates, k)
        where = f"{table}.{column}"
        if not ranked:
            return f"{where} holds no values."
        hits = similarity.synonym_hits(value, [candidate for candidate, _ in ranked])
        lines = [f"{len(ranked)} of {len(candidates)} distinct values of {where} ranked by similarity to {value!r} "
                 "(score 0..1; 'synonym' marks values the curated synonym table lists for this term):",
                 "value | score | match"]
        lines += [f"{cell_text(candidate)} | {score:.3f} | {'synonym' if candidate in hits else 'similar'}"
                  for candidate, score in ranked]
        if capped:
            lines.append(f"[the column has more than {MAX_CANDIDATES} distinct values; only the first "
                         f"{MAX_CANDIDATES} in value order were ranked: use value_substring_search to narrow]")
        return truncated("\n".join(lines), self.max_chars, "lower k")

    def sql_execute(self, query: str, k: int = DEFAULT_K) -> str:
        k, capped = bounded_count("k", k, self.max_rows)
        result = self._run(query, k)
        if not result.columns:
            return "The statement ran and returned no result set."
        text = table_text(result.columns, result.rows)
        lines = [f"{result.row_count_returned} row(s):" if not result.truncated
                 else f"the first {k} rows (the query returned more{'; k is capped at ' + str(k) if capped else ''}; "
                      "add WHERE filters, aggregate, or ORDER BY ... LIMIT to see what you need):", text]
        if result.limits_note:  # before the rows: a long table is cut from its end
            lines.insert(1, f"[{result.limits_note}: select fewer or shorter values (substr, aggregates)]")
        return truncated("\n".join(lines), self.max_chars,
                         "select fewer columns or rows (WHERE, LIMIT, aggregates) or lower k")

    # --- catalog and validation --------------------------------------------------------------------------------

    def _read_catalog(self) -> dict[str, list[tuple[str, str]]]:
        columns: dict[str, list[tuple[str, str]]] = {}
        if self.engine == "duckdb":
            rows = self._run("SELECT table_name, column_name, data_type FROM information_schema.columns "
                             "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position", None).rows
            for table, column, kind in rows:
                columns.setdefault(table, []).append((column, kind))
            return columns
        tables = [name for (name,) in self._run(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' "
            "ESCAPE '\\' ORDER BY name", None).rows]
        for table in tables:  # pragma_table_info() is not allowed by the sandbox; the PRAGMA statement is
            info = self._run(f"PRAGMA table_info({sql_literal(table)})", None)
            columns[table] = [(row[1], row[2] or "") for row in info.rows]
        return columns

    def _table(self, name: str) -> str:
        """The catalog's name for `name` (exact, else the one case-insensitive match)."""
        if name in self._columns:
            return name
        matches = [table for table in self._columns if table.lower() == name.strip().lower()]
        if len(matches) == 1:
            return matches[0]
        raise ToolError(f"unknown table {name!r}; the tables are: {', '.join(self._columns)}")

    def _column(self, table: str, name: str) -> str:
        names = [column for column, _ in self._columns[table]]
        if name in names:
            return name
        matches = [column for column in names if column.lower() == name.strip().lower()]
        if len(matches) == 1:
            return matches[0]
        raise ToolError(f"unknown column {name!r} in table {table}; its columns are: {', '.join(names)}")

    def _ddl(self, table: str) -> str:
        columns = ",\n".join(f"  {sql_identifier(column) if not column.isidentifier() else column} {kind}".rstrip()
                             for column, kind in self._columns[table])
        return f"CREATE TABLE {table} (\n{columns}\n);"

    @staticmethod
    def _distinct_text(table: str, column: str) -> str:
        """A subquery of the column's distinct non-null values as text, named so that no column of the table can
        shadow it (TEXT is VARCHAR in DuckDB: the same SQL serves both engines)."""
        return (f"(SELECT DISTINCT CAST({sql_identifier(column)} AS TEXT) AS stored_value FROM {sql_identifier(table)} "
                f"WHERE {sql_identifier(column)} IS NOT NULL) AS distinct_values")

    def _distinct_values(self, table: str, column: str) -> tuple[list[str], bool]:
        key = (table, column)
        if key not in self._candidates:
            result = self._run(f"SELECT stored_value FROM {self._distinct_text(table, column)} "
                               f"ORDER BY stored_value LIMIT {MAX_CANDIDATES + 1}", MAX_CANDIDATES,
                               max_bytes=CANDIDATE_BYTES)
            self._candidates[key] = ([row[0] for row in result.rows], result.truncated or result.bytes_capped)
        return self._candidates[key]

    def _value_similarity(self) -> ValueSimilarity:
        if self._similarity is None:  # loaded on first use: most trials never rank values
            self._similarity = ValueSimilarity()
        return self._similarity

    def _run(self, sql: str, max_rows: int | None, max_bytes: int | None = None) -> QueryResult:
        """One statement through the sandbox with its own row cap (None: no practical cap, for the catalog) and,
        for the tools' own statements, its own size cap."""
        previous = self._sandbox.max_rows, self._sandbox.max_bytes
        self._sandbox.max_rows = max_rows if max_rows is not None else 1_000_000
        self._sandbox.max_bytes = max_bytes or previous[1]
        try:
            return self._sandbox.execute(sql)
        finally:
            self._sandbox.max_rows, self._sandbox.max_bytes = previous
