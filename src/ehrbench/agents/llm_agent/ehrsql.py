"""The `ehrsql` suite: EHRSQL-2024 single-turn text-to-SQL (`ehrsql_mode` single_turn: the schema in the prompt, one
reply: SQL or `null` to abstain), or a ReAct agent with the EHR-ChatQA database tools that finishes with
`submit_answer(sql)` or `abstain(reason)`.
"""

from __future__ import annotations

import re

from ehrbench.agents.llm_agent.core import LlmAgent, prompt
from ehrbench.agents.llm_agent.sql_answer import ENGINES, SqlAnswer, run_answer, sql_rules
from ehrbench.agents.tools.database import DatabaseTools
from ehrbench.tasks import AgentAnswer, TaskView

SUITE = "ehrsql"

_SQL_FENCE = re.compile(r"```(?:sql)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def run(agent: LlmAgent, view: TaskView) -> AgentAnswer:
    if agent.config.options.ehrsql_mode == "single_turn":
        return _single_turn(agent, view)
    with agent.database_tools(view.database) as tools:
        messages = [{"role": "system", "content": prompt("ehrsql_tools", engine=ENGINES[tools.engine],
                                                         rules=sql_rules(tools, view))},
                    {"role": "user", "content": view.instruction}]
        submit = SqlAnswer(tools, view)
        outcome = agent.loop(messages, tools, submit.finishers())
        return submit.answer(outcome, messages)


def _single_turn(agent: LlmAgent, view: TaskView) -> AgentAnswer:
    with agent.database_tools(view.database, tools=("sql_execute",)) as tools:
        system = prompt("ehrsql_single_turn", engine=ENGINES[tools.engine], schema=schema_text(tools),
                        rules=sql_rules(tools, view))
        messages = [{"role": "system", "content": system}, {"role": "user", "content": view.instruction}]
        options = agent.config.options
        turn = agent.chat_model().chat(messages, [], temperature=options.temperature, max_tokens=options.max_tokens)
        messages.append({"role": "assistant", "content": turn.text})
        answer = AgentAnswer(input_tokens=turn.usage.input_tokens, output_tokens=turn.usage.output_tokens,
                             transcript=messages)
        sql = extract_sql(turn.text or "")
        if sql is None:
            answer.abstained = True
            return answer
        answer.sql = sql
        answer.answer_rows, error = run_answer(tools, sql, view)
        if error:
            messages.append({"role": "harness", "content": f"the SQL failed: {error}"})
        return answer


def extract_sql(text: str) -> str | None:
    """The SQL of a single-turn reply: the first ```sql block, else the whole reply; None for `null` (EHRSQL-2024's
    abstention) or an empty reply."""
    fenced = _SQL_FENCE.search(text)
    sql = (fenced.group(1) if fenced else text).strip().rstrip(";").strip()
    if not sql or sql.lower() in ("null", "'null'", '"null"'):
        return None
    return sql


def schema_text(tools: DatabaseTools) -> str:
    """CREATE TABLE-like lines of every table, for a single-turn prompt: `table(column type, …)`, from the catalog
    the tools read once (on SQLite through PRAGMA table_info: the sandbox refuses pragma_table_info())."""
    return "\n".join(f"{table}({', '.join(f'{column} {kind}' for column, kind in columns)})"
                     for table, columns in tools.catalog.items())
