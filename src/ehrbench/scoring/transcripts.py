"""What a scorer reads from a trial's transcript (`AgentAnswer.transcript`, OpenAI chat format as the agents' ReAct
loop writes it, `ehrbench.agents.react`): the agent's replies to the user and the results of its `sql_execute` calls.

A reply is an assistant message without tool calls (the loop hands exactly those to the simulated user; text written
next to a tool call is not sent) or a baseline's `{"role": "agent"}` entry. A `sql_execute` result is the tool message
answering a `sql_execute` call, in the text the database tools answer with (`ehrbench.agents.tools`):

- EHR-ChatQA's form: the rows as a Python list of tuples, `[(1, 'aspirin'), (2, None)]`, then notes after a blank
  line (`Note: There are N results not shown …`);
- the earlier table form: a status line (`3 row(s):` / `the first 100 rows …:`), an optional `[limits note]`, a
  header, one line per row with cells joined by " | " (NULL for None, booleans as True/False, read as 1/0), and an
  optional `[output truncated …]` line.

A result that cannot be read back faithfully (an error, a text cut short, a row whose cell count differs from the
header's because a value holds " | ") is left out.
"""

from __future__ import annotations

import ast
import re

SQL_EXECUTE = "sql_execute"
_STATUS = re.compile(r"^(?:\d+ row\(s\):|the first \d+ rows .*:)$")
_CELL_SEPARATOR = " | "
_BOOLEANS = {"True": 1, "False": 0}


def agent_replies(transcript: list[dict]) -> list[str]:
    """The agent's messages to the user, in order."""
    replies = []
    for message in transcript:
        if not isinstance(message, dict) or message.get("role") not in ("assistant", "agent"):
            continue
        content = message.get("content")
        if not message.get("tool_calls") and isinstance(content, str):
            replies.append(content)
    return replies


def _calls(transcript: list[dict]) -> dict[str, str]:
    """tool call id → tool name."""
    names = {}
    for message in transcript:
        if isinstance(message, dict) and message.get("role") == "assistant":
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                if call.get("id") is not None:
                    names[call["id"]] = function.get("name")
    return names


def sql_execute_results(transcript: list[dict]) -> list[list[list[object]]]:
    """The rows of every readable `sql_execute` result, in order."""
    names = _calls(transcript)
    results = []
    for message in transcript:
        if (isinstance(message, dict) and message.get("role") == "tool"
                and names.get(message.get("tool_call_id")) == SQL_EXECUTE and isinstance(message.get("content"), str)):
            rows = read_result(message["content"])
            if rows is not None:
                results.append(rows)
    return results


def read_result(text: str) -> list[list[object]] | None:
    """The rows of one `sql_execute` result text (module docstring), or None when it holds none that read back."""
    if text.startswith("["):
        return _python_rows(text.split("\n\nNote: ", 1)[0])
    lines = text.split("\n")
    if not lines or not _STATUS.match(lines[0]):
        return None
    body = lines[1:]
    if body and body[0].startswith("[") and body[0].endswith("]"):
        body = body[1:]  # the limits note
    if body and body[-1].startswith("[output truncated"):
        body = body[:-1]
    if not body:
        return None
    width = len(body[0].split(_CELL_SEPARATOR))
    rows = [line.split(_CELL_SEPARATOR) for line in body[1:]]
    if any(len(row) != width for row in rows):
        return None
    return [[_cell(cell) for cell in row] for row in rows]


def _python_rows(text: str) -> list[list[object]] | None:
    try:
        rows = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if isinstance(rows, list) and all(isinstance(row, tuple | list) for row in rows):
        return [list(row) for row in rows]
    return None


def _cell(text: str) -> object:
    if text == "NULL":
        return None
    return _BOOLEANS.get(text, text)

