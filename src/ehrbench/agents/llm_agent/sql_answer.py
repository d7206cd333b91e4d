"""What the SQL suites (ehrsql, chatqa) share: their rules prompt and their answer. The answer of a SQL suite is the
result of the agent's final SQL, run by the harness in the same sandbox (first 100 rows, as EHRSQL-2024 scores), so a
model is never scored on how it retypes a table. An imported published task's SQL is first rewritten as its
protocol's scorer rewrites a prediction (`ehrbench.scoring.prediction_sql`: e.g. EHRSQL-2024's `current_time`).
"""

from __future__ import annotations

from ehrbench.agents.llm_agent.core import ABSTAIN, base_answer, prompt
from ehrbench.agents.react import Finisher, LoopOutcome
from ehrbench.agents.sandbox import SqlError
from ehrbench.agents.tools.database import DatabaseTools
from ehrbench.llm.tool_chat import ToolCall, ToolSpec
from ehrbench.questions.generate import plain_cell
from ehrbench.scoring import prediction_sql
from ehrbench.tasks import AgentAnswer, TaskView

ENGINES = {"duckdb": "DuckDB", "sqlite": "SQLite"}  # as the prompts name them

SUBMIT_SQL = ToolSpec("submit_answer", "Give your final answer as the SQL query whose result answers the question. "
                      "The harness runs it and its result is your answer.",
                      {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]})


def sql_rules(tools: DatabaseTools, view: TaskView) -> str:
    """The rules every SQL prompt ends with: the engine, the task's context (its 'now'), abstain over guessing."""
    return prompt("sql_rules", engine=ENGINES[tools.engine], context=view.context or "")


class SqlAnswer:
    """submit_answer(sql) and abstain of the SQL suites: the SQL must run; its rows are the answer. The last
    accepted call counts (a conversation may change its mind); a call that was refused or not run does not."""

    def __init__(self, tools: DatabaseTools, view: TaskView, ends_loop: bool = True):
        self.tools, self.view, self.ends_loop = tools, view, ends_loop
        self.sql: str | None = None
        self.rows: list[list] | None = None
        self.abstained = False

    def finishers(self) -> list[Finisher]:
        told = "" if self.ends_loop else " Now tell the user."
        return [Finisher(SUBMIT_SQL, self._submit, ends_loop=self.ends_loop, result="Answer recorded." + told),
                Finisher(ABSTAIN, self._abstain, ends_loop=self.ends_loop,
                         result="Recorded: you declined to answer." + told)]

    def _submit(self, call: ToolCall) -> str | None:
        sql = str(call.arguments.get("sql", "")).strip()
        rows, error = run_answer(self.tools, sql, self.view)
        if error:
            return f"the SQL failed, nothing was recorded: {error}"
        self.sql, self.rows, self.abstained = sql, rows, False
        return None

    def _abstain(self, call: ToolCall) -> str | None:
        self.sql, self.rows, self.abstained = None, None, True
        return None

    def answer(self, outcome: LoopOutcome, messages: list[dict]) -> AgentAnswer:
        answer = base_answer(outcome, messages)
        answer.abstained = self.abstained
        if self.sql is not None:
            answer.sql, answer.answer_rows = self.sql, self.rows
        return answer


def run_answer(tools: DatabaseTools, sql: str, view: TaskView) -> tuple[list[list] | None, str | None]:
    """The answer rows of `sql` (as the task's protocol's scorer would run it), or the error that stopped it."""
    if not sql:
        return None, "empty query"
    try:
        result = tools.execute_rows(prediction_sql(view.protocol, sql, view.current_time))
    except SqlError as exc:
        return None, str(exc)
    # cells as the gold answers hold them (booleans 0/1, decimals as floats, times as text)
    return [[plain_cell(cell) for cell in row] for row in result.rows], None  # scoring sorts, then keeps 100
