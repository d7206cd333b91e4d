"""The `dq` suite (the data-quality audit): the audit instruction and SQL over the task's tables, loaded into a scratch
DuckDB file the agent reads read-only; `flag_rows(table, query)` collects the rows it judges erroneous,
`submit_audit()` ends. With the agent option dq_interface=terminal, HealthAgentBench's setting instead: a shell in a
copy of the task folder, where the agent writes flagged_rows.csv (`run_in_terminal`).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ehrbench.agents.llm_agent.core import LlmAgent, base_answer, prompt
from ehrbench.agents.react import Finisher
from ehrbench.agents.sandbox import SqlError, SqlSandbox
from ehrbench.agents.tools.shell import ShellTools
from ehrbench.llm.tool_chat import ToolCall, ToolSpec
from ehrbench.tasks import AgentAnswer, TaskView
from ehrbench.warehouse import open_duckdb
from ehrbench.workspace.verify import audit_submission, write_audit_workspace

SUITE = "dq"

AUDIT_FLAG_CAP = 100_000  # rows one flag_rows query may flag

FLAG_ROWS = ToolSpec("flag_rows", "Flag rows of one table as erroneous: a SELECT over that table returning its "
                     "_row_id column for the rows to flag. Can be called many times; flags accumulate.",
                     {"type": "object", "properties": {"table": {"type": "string"}, "query": {"type": "string"}},
                      "required": ["table", "query"]})
SUBMIT_AUDIT = ToolSpec("submit_audit", "Finish the audit: the rows flagged so far are your submission.")
SUBMIT_WORKSPACE = ToolSpec("submit_audit", "Finish the audit: flagged_rows.csv in the task folder is your submission.")


def run(agent: LlmAgent, view: TaskView) -> AgentAnswer:
    if agent.config.options.dq_interface == "terminal":
        return run_in_terminal(agent, view)
    scratch = Path(tempfile.mkdtemp(prefix="ehrbench-audit-"))
    try:
        database = load_audit_tables(view.data_dir, scratch / "audit.duckdb")
        with agent.database_tools(database, tools=("table_search", "column_search", "sql_execute")) as tools:
            audit = _Audit(database, agent.config.options.sql_timeout_s, agent.sandbox)
            messages = [{"role": "system", "content": prompt("dq_system", instruction=view.instruction)},
                        {"role": "user", "content": prompt("dq_user")}]
            try:
                outcome = agent.loop(messages, tools,
                                     [Finisher(FLAG_ROWS, audit.flag, ends_loop=False, result="Flagged."),
                                      Finisher(SUBMIT_AUDIT, lambda call: None)])
            finally:
                audit.close()
        answer = base_answer(outcome, messages)
        answer.flagged_rows = sorted(audit.flagged)
        return answer
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_in_terminal(agent: LlmAgent, view: TaskView) -> AgentAnswer:
    """HealthAgentBench's setting: a shell (run_shell) in a fresh copy of the task folder (instruction.md, data/);
    the rows flagged are those of the flagged_rows.csv the agent leaves there when it calls submit_audit or stops."""
    scratch = Path(tempfile.mkdtemp(prefix="ehrbench-workspace-"))
    try:
        workspace = write_audit_workspace(view.instruction, view.data_dir, scratch / "workspace")
        options = agent.config.options
        shell = ShellTools(workspace, isolation=agent.sandbox, command_timeout_s=options.shell_timeout_s,
                           budget_s=options.workspace_budget_s)
        messages = [{"role": "system", "content": prompt("dq_terminal_system", instruction=view.instruction)},
                    {"role": "user", "content": prompt("dq_user")}]
        outcome = agent.loop(messages, shell, [Finisher(SUBMIT_WORKSPACE, lambda call: None)])
        answer = base_answer(outcome, messages)
        answer.flagged_rows = sorted(audit_submission(workspace).rows)
        return answer
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def load_audit_tables(data_dir: Path, database: Path) -> Path:
    """The task's CSV tables in a scratch DuckDB file (`_row_id` and every column read as text, as written)."""
    with open_duckdb(str(database)) as con:
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
