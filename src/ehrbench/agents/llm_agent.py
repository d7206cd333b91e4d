"""The LLM agent: one model behind a tool-calling interface, doing each suite the way its benchmark's agents do.

- `ehrsql`: EHRSQL-2024 single-turn text-to-SQL (the schema in the prompt, one reply: SQL or `null` to abstain), or
  a ReAct agent with the EHR-ChatQA database tools that finishes with `submit_answer(sql)` or `abstain(reason)`.
- `chatqa`: EHR-ChatQA: the agent never sees the task; it talks with a simulated user (ehrbench.agents.simulated_user)
  who reveals what they want one constraint at a time and ends the conversation. The agent records its answer with
  `submit_answer(sql)` (it may revise it) and tells the user. A post-hoc validator checks the user's side; a
  conversation the user got wrong is re-run (at most `user_reruns` times) and, if it never comes out clean, the trial
  is marked invalid — not scored.
- `fhir`: FHIR-AgentBench: retriever, search-query or code-interpreter tools over the build's FHIR resources, then
  `submit_answer(answer)`; the resources the agent retrieved are its retrieval for precision/recall.
- `dq`: the audit instruction and SQL over the task's tables (loaded into a scratch DuckDB file the agent reads
  read-only); `flag_rows(table, query)` collects the rows it judges erroneous, `submit_audit()` ends.

The answer of a SQL suite is the result of the agent's final SQL, run by the harness in the same sandbox (first 100
rows, as EHRSQL-2024 scores), so a model is never scored on how it retypes a table. Models are made per process
from the config (clients are not picklable: a Dask worker makes its own).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from functools import cache
from pathlib import Path

import duckdb

from ehrbench.agents.config import AgentConfig
from ehrbench.agents.react import Finisher, LoopOutcome, react_loop
from ehrbench.agents.sandbox import SqlError, SqlSandbox
from ehrbench.agents.simulated_user import SimulatedUser, validate_conversation
from ehrbench.agents.tools.database import DatabaseTools
from ehrbench.agents.tools.fhir import FhirTools
from ehrbench.agents.tools.similarity import ValueSimilarity
from ehrbench.fhir.search import SearchIndex
from ehrbench.llm.chat import embedding_model
from ehrbench.llm.tools import ToolCall, ToolChatModel, ToolSpec, Usage, cost_usd, tool_chat_model
from ehrbench.questions.generate import plain_cell
from ehrbench.questions.interactive import LayTerms, load_lay_terms
from ehrbench.tasks import AgentAnswer, TaskView

ANSWER_ROWS = 100  # EHRSQL-2024 compares the first 100 rows
AUDIT_FLAG_CAP = 100_000  # rows one flag_rows query may flag
_ENGINES = {"duckdb": "DuckDB", "sqlite": "SQLite"}
_SQL_FENCE = re.compile(r"```(?:sql)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)

_SUBMIT_SQL = ToolSpec("submit_answer", "Give your final answer as the SQL query whose result answers the question. "
                       "The harness runs it and its result is your answer.",
                       {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]})
_SUBMIT_TEXT = ToolSpec("submit_answer", "Give your final answer: the value(s) asked for, as short text; list several "
                        "values separated by commas.",
                        {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]})
_ABSTAIN = ToolSpec("abstain", "Decline to answer because the question cannot be answered from the records "
                    "(say why). Use it instead of guessing.",
                    {"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]})
_FLAG_ROWS = ToolSpec("flag_rows", "Flag rows of one table as erroneous: a SELECT over that table returning its "
                      "_row_id column for the rows to flag. Can be called many times; flags accumulate.",
                      {"type": "object", "properties": {"table": {"type": "string"}, "query": {"type": "string"}},
                       "required": ["table", "query"]})
_SUBMIT_AUDIT = ToolSpec("submit_audit", "Finish the audit: the rows flagged so far are your submission.")

_SQL_RULES = ("Rules: the database is read-only; write one {engine} SELECT statement at a time. {context} Times in the "
              "database are shifted into the future; take 'now' from the current time given here, never from the "
              "clock. If the question asks for something the records do not hold, abstain instead of guessing.")

_SINGLE_TURN = """You translate questions about a hospital's electronic health records into SQL for {engine}.

Database schema:
{schema}

{rules}
Reply with the SQL query only (in a ```sql block), or with the single word null if the question cannot be answered
from this database."""

_TOOLS_SYSTEM = """You answer questions about a hospital's electronic health records stored in a database ({engine}).
Explore it with your tools (table_search, column_search, value searches, sql_execute), then call submit_answer with
the SQL query whose result answers the question, or abstain if it cannot be answered from the records.
{rules}"""

_CHATQA_SYSTEM = """You are a database assistant for clinicians. A user will ask you for information from a hospital's
electronic health records ({engine} database). Find what they want with your tools; ask them when something is
unclear (values in the database may be stored under other names than the ones they use: search for them). Each time
you have an answer, record it with submit_answer (the SQL query whose result answers the user's whole request;
record it again if the request changes) and then tell the user the result in plain words. If the request cannot be
answered from the records, call abstain and tell the user. Reply to the user in plain text (no tool call) when you
talk to them.
{rules}"""

_FHIR_SYSTEM = """You answer questions about one patient from their FHIR R4 records, using your tools. {context}
The patient's FHIR Patient id is {patient}. Dates in the records are shifted into the future; take 'now' from the
current time given here. When you know the answer, call submit_answer with just the value(s) asked for (a yes/no
question: yes or no; a time: as written in the record). If the records cannot answer the question, call abstain."""

_DQ_SYSTEM = """You are auditing an extract of electronic health records for data-quality errors. The tables are in
a read-only DuckDB database: explore them with table_search, column_search and sql_execute. Every row has a
_row_id. Flag the rows you judge erroneous with flag_rows (a SELECT returning _row_id over one table; flags
accumulate), then call submit_audit. Precision matters too: flag what you can justify.

The audit instruction:
{instruction}"""

_NUDGE = "Finish the task with one of your tools ({tools})."


class LlmAgent:
    """An agent backed by a tool-calling model; `api_key` is resolved by the caller (environment or secret)."""

    def __init__(self, config: AgentConfig, api_key: str | None = None, *, sandbox: str = "bubblewrap") -> None:
        if config.kind != "llm":
            raise ValueError(f"agent {config.name!r} is not an llm agent")
        self.config = config
        self.name = config.name
        self.sandbox = sandbox  # how its SQL and Python are isolated; recorded in each result row
        self._api_key = api_key

    def __repr__(self) -> str:  # never the key
        return f"LlmAgent({self.config.name!r}, model={self.config.model!r})"

    def run(self, view: TaskView) -> AgentAnswer:
        runners = {"ehrsql": self._ehrsql, "chatqa": self._chatqa, "fhir": self._fhir, "dq": self._dq}
        answer = runners[view.suite](view)
        answer.model = self.config.model
        answer.cost_usd = cost_usd(self._model_name(), Usage(answer.input_tokens, answer.output_tokens))
        return answer

    # --- models ------------------------------------------------------------------------------------------------------

    def _model(self, spec: str | None = None) -> ToolChatModel:
        """The agent's model, or another (simulated user, validator) that reads its key from the environment."""
        options = self.config.options
        own = spec in (None, self.config.model)
        key = self._api_key or (os.environ.get(options.api_key_env) if options.api_key_env else None)
        return _tool_model(spec or self.config.model, key if own else None, options.timeout_s, options.max_retries)

    def _model_name(self) -> str:
        return self.config.model.split(":", 1)[1].split("@", 1)[0]

    def _loop(self, messages: list[dict], toolbox, finishers: list[Finisher], on_text=None) -> LoopOutcome:
        options = self.config.options
        if on_text is None:
            on_text = _nudge_once([f.spec.name for f in finishers])
        return react_loop(self._model(), messages, toolbox, finishers, max_actions=options.max_actions,
                          temperature=options.temperature, max_tokens=options.max_tokens, on_text=on_text)

    def _database_tools(self, database: Path, tools: tuple[str, ...] | None = None) -> DatabaseTools:
        options = self.config.options
        similarity = _value_similarity(options.value_search_synonyms, options.embedding_model, options.timeout_s,
                                       options.max_retries)
        kwargs = {"tools": tools} if tools else {}
        return DatabaseTools(database, max_rows=ANSWER_ROWS, timeout_s=options.sql_timeout_s, similarity=similarity,
                             isolation=self.sandbox, **kwargs)

    # --- suites ------------------------------------------------------------------------------------------------------

    def _ehrsql(self, view: TaskView) -> AgentAnswer:
        if self.config.options.ehrsql_mode == "single_turn":
            return self._ehrsql_single_turn(view)
        with self._database_tools(view.database) as tools:
            messages = [{"role": "system", "content": _TOOLS_SYSTEM.format(engine=_ENGINES[tools.engine],
                                                                           rules=_rules(tools, view))},
                        {"role": "user", "content": view.instruction}]
            submit = _SqlAnswer(tools)
            outcome = self._loop(messages, tools, submit.finishers())
            return submit.answer(outcome, messages)

    def _ehrsql_single_turn(self, view: TaskView) -> AgentAnswer:
        with self._database_tools(view.database, tools=("sql_execute",)) as tools:
            system = _SINGLE_TURN.format(engine=_ENGINES[tools.engine], schema=schema_text(tools),
                                         rules=_rules(tools, view))
            messages = [{"role": "system", "content": system}, {"role": "user", "content": view.instruction}]
            options = self.config.options
            turn = self._model().chat(messages, [], temperature=options.temperature, max_tokens=options.max_tokens)
            messages.append({"role": "assistant", "content": turn.text})
            answer = AgentAnswer(input_tokens=turn.usage.input_tokens, output_tokens=turn.usage.output_tokens,
                                 transcript=messages)
            sql = extract_sql(turn.text or "")
            if sql is None:
                answer.abstained = True
                return answer
            answer.sql = sql
            answer.answer_rows, error = _run_answer(tools, sql)
            if error:
                messages.append({"role": "harness", "content": f"the SQL failed: {error}"})
            return answer

    def _chatqa(self, view: TaskView) -> AgentAnswer:
        options = self.config.options
        user_model = self._model(options.user_model)
        validator = self._model(options.validator_model or options.user_model)
        attempts: list[dict] = []
        usage = Usage()
        for _attempt in range(options.user_reruns + 1):
            with self._database_tools(view.database) as tools:
                user = SimulatedUser(user_model, view.instruction, max_turns=options.max_user_turns)
                opening = user.start()
                messages = [{"role": "system", "content": _CHATQA_SYSTEM.format(engine=_ENGINES[tools.engine],
                                                                                rules=_rules(tools, view))},
                            {"role": "user", "content": opening.text}]
                submit = _SqlAnswer(tools, ends_loop=False)

                def to_user(text: str, user: SimulatedUser = user) -> str | None:
                    turn = user.reply(text)
                    return None if turn.stopped else turn.text

                outcome = self._loop(messages, tools, submit.finishers(),
                                     on_text=(lambda _text: None) if opening.stopped else to_user)
                answer = submit.answer(outcome, messages)
            validation = validate_conversation(validator, view.instruction, user.transcript)
            usage += user.usage + validation.usage
            attempts.append({"conversation": user.transcript, "valid": validation.valid,
                             "validator": validation.reason})
            if validation.valid:
                break
        answer.user_turns = user.turns
        answer.user_error = not validation.valid
        answer.transcript = [*answer.transcript,
                             {"role": "harness", "user_attempts": attempts,
                              "user_tokens": [usage.input_tokens, usage.output_tokens]}]
        return answer

    def _fhir(self, view: TaskView) -> AgentAnswer:
        options = self.config.options
        tools = FhirTools(view.fhir_resources, index=_search_index(view.fhir_resources),
                          variant=options.fhir_variant, isolation=self.sandbox)
        context = view.context or ""
        messages = [{"role": "system", "content": _FHIR_SYSTEM.format(context=context,
                                                                      patient=view.patient_fhir_id or "not given")},
                    {"role": "user", "content": view.instruction}]
        outcome = self._loop(messages, tools, [Finisher(_SUBMIT_TEXT, lambda call: None),
                                               Finisher(_ABSTAIN, lambda call: None)])
        answer = _base_answer(outcome, messages)
        answer.fhir_ids = tuple(tools.retrieved_ids)
        if outcome.finish is not None and outcome.finish.name == "abstain":
            answer.abstained = True
        elif outcome.finish is not None:
            answer.answer_text = str(outcome.finish.arguments.get("answer", ""))
            answer.free_text = True
        return answer

    def _dq(self, view: TaskView) -> AgentAnswer:
        scratch = Path(tempfile.mkdtemp(prefix="ehrbench-audit-"))
        try:
            database = load_audit_tables(view.data_dir, scratch / "audit.duckdb")
            with self._database_tools(database, tools=("table_search", "column_search", "sql_execute")) as tools:
                audit = _Audit(database, self.config.options.sql_timeout_s, self.sandbox)
                messages = [{"role": "system", "content": _DQ_SYSTEM.format(instruction=view.instruction)},
                            {"role": "user", "content": "Audit the tables and flag the erroneous rows."}]
                try:
                    outcome = self._loop(messages, tools,
                                         [Finisher(_FLAG_ROWS, audit.flag, ends_loop=False, result="Flagged."),
                                          Finisher(_SUBMIT_AUDIT, lambda call: None)])
                finally:
                    audit.close()
            answer = _base_answer(outcome, messages)
            answer.flagged_rows = sorted(audit.flagged)
            return answer
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


# --- helpers of the suites -------------------------------------------------------------------------------------------

@cache
def _tool_model(spec: str, api_key: str | None, timeout_s: float, max_retries: int) -> ToolChatModel:
    """One client per model per process (clients hold connection pools; trials share them)."""
    return tool_chat_model(spec, api_key=api_key, timeout_s=timeout_s, max_retries=max_retries)


@cache
def _synonyms() -> LayTerms:
    """The curated synonym table, read once per process."""
    return load_lay_terms()


@cache
def _value_similarity(synonyms: bool, embedding_spec: str | None, timeout_s: float,
                      max_retries: int) -> ValueSimilarity:
    """One per process and setting: its embedding client and cached value embeddings serve every trial."""
    embedder = (embedding_model(embedding_spec, timeout_s=timeout_s, max_retries=max_retries)
                if embedding_spec else None)
    return ValueSimilarity(synonyms=_synonyms() if synonyms else None, embedder=embedder)


@cache
def _search_index(resources_db: Path) -> SearchIndex:
    """The FHIR search index of a build, built once per process (it scans every resource)."""
    return SearchIndex(resources_db)


def _rules(tools: DatabaseTools, view: TaskView) -> str:
    return _SQL_RULES.format(engine=_ENGINES[tools.engine], context=view.context or "")


def _nudge_once(tool_names: list[str]):
    nudged = []

    def on_text(_text: str) -> str | None:
        if nudged:
            return None
        nudged.append(True)
        return _NUDGE.format(tools=", ".join(tool_names))

    return on_text


def _base_answer(outcome: LoopOutcome, messages: list[dict]) -> AgentAnswer:
    return AgentAnswer(tool_calls=outcome.actions, tool_errors=outcome.tool_errors,
                       input_tokens=outcome.usage.input_tokens, output_tokens=outcome.usage.output_tokens,
                       stop_reason=outcome.stop_reason, transcript=messages)


class _SqlAnswer:
    """submit_answer(sql) and abstain of the SQL suites: the SQL must run; its rows are the answer. The last
    accepted call counts (a conversation may change its mind); a call that was refused or not run does not."""

    def __init__(self, tools: DatabaseTools, ends_loop: bool = True):
        self.tools, self.ends_loop = tools, ends_loop
        self.sql: str | None = None
        self.rows: list[list] | None = None
        self.abstained = False

    def finishers(self) -> list[Finisher]:
        told = "" if self.ends_loop else " Now tell the user."
        return [Finisher(_SUBMIT_SQL, self._submit, ends_loop=self.ends_loop, result="Answer recorded." + told),
                Finisher(_ABSTAIN, self._abstain, ends_loop=self.ends_loop,
                         result="Recorded: you declined to answer." + told)]

    def _submit(self, call: ToolCall) -> str | None:
        sql = str(call.arguments.get("sql", "")).strip()
        rows, error = _run_answer(self.tools, sql)
        if error:
            return f"the SQL failed, nothing was recorded: {error}"
        self.sql, self.rows, self.abstained = sql, rows, False
        return None

    def _abstain(self, call: ToolCall) -> str | None:
        self.sql, self.rows, self.abstained = None, None, True
        return None

    def answer(self, outcome: LoopOutcome, messages: list[dict]) -> AgentAnswer:
        answer = _base_answer(outcome, messages)
        answer.abstained = self.abstained
        if self.sql is not None:
            answer.sql, answer.answer_rows = self.sql, self.rows
        return answer


def _run_answer(tools: DatabaseTools, sql: str) -> tuple[list[list] | None, str | None]:
    if not sql:
        return None, "empty query"
    try:
        result = tools.execute_rows(sql)
    except SqlError as exc:
        return None, str(exc)
    # cells as the gold answers hold them (booleans 0/1, decimals as floats, times as text)
    return [[plain_cell(cell) for cell in row] for row in result.rows], None  # scoring sorts, then keeps 100


def extract_sql(text: str) -> str | None:
    """The SQL of a single-turn reply: the first ```sql block, else the whole reply; None for `null` (EHRSQL-2024's
    abstention) or an empty reply."""
    fenced = _SQL_FENCE.search(text)
    sql = (fenced.group(1) if fenced else text).strip().rstrip(";").strip()
    if not sql or sql.lower() in ("null", "'null'", '"null"'):
        return None
    return sql


def schema_text(tools: DatabaseTools) -> str:
    """CREATE TABLE-like lines of every table, for a single-turn prompt."""
    if tools.engine == "sqlite":
        sql = ("select m.name, group_concat(p.name || ' ' || p.type, ', ') from sqlite_master m, "
               "pragma_table_info(m.name) p where m.type = 'table' group by m.name order by m.name")
    else:
        sql = ("select table_name, string_agg(column_name || ' ' || data_type, ', ' order by ordinal_position) "
               "from information_schema.columns group by table_name order by table_name")
    rows = tools.execute_rows(sql).rows  # a hundred tables is more than any of our databases has
    return "\n".join(f"{table}({columns})" for table, columns in rows)


def load_audit_tables(data_dir: Path, database: Path) -> Path:
    """The task's CSV tables in a scratch DuckDB file (`_row_id` and every column read as text, as written)."""
    with duckdb.connect(str(database)) as con:
        for path in sorted(data_dir.glob("*.csv.gz")):
            table = path.name.removesuffix(".csv.gz")
            con.execute(f'create table "{table}" as select * from read_csv(?, header = true, all_varchar = true)',
                        [str(path)])
    return database


class _Audit:
    """flag_rows: the agent's query runs in a sandbox of its own (read-only, timeout; a row cap far above the
    tools' 100) and must return the table's _row_id column; ids not in the table are ignored; flags accumulate."""

    def __init__(self, database: Path, timeout_s: float, isolation: str):
        self._sandbox = SqlSandbox(database, timeout_s=timeout_s, max_rows=AUDIT_FLAG_CAP,
                                   isolation=isolation).__enter__()
        self.tables = {name for (name,) in self._sandbox.execute(
            "select table_name from information_schema.tables").rows}
        self.flagged: set[tuple[str, str]] = set()

    def flag(self, call: ToolCall) -> str | None:
        table, query = str(call.arguments.get("table", "")), str(call.arguments.get("query", "")).strip().rstrip(";")
        if table not in self.tables:
            return f"no table {table!r}; the tables are {', '.join(sorted(self.tables))}"
        try:
            result = self._sandbox.execute(f'select distinct q._row_id::varchar from ({query}\n) q '
                                           f'where q._row_id::varchar in (select _row_id from "{table}")')
        except SqlError as exc:
            return f"the query failed: {exc}. It must be one SELECT returning the _row_id column of {table}."
        self.flagged.update((table, row_id) for (row_id,) in result.rows)
        return None

    def close(self) -> None:
        self._sandbox.__exit__(None, None, None)
