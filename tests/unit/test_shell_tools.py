"""run_shell as a tool (ehrbench.agents.tools.shell): its answer to the model, a command over its time as an error
the model reads, and the task's time budget refusing every call once it is spent. Unconfined here (isolation
"unsafe: ..."): the confinement itself is tests/security/test_shell_sandbox.py's."""

from __future__ import annotations

import json

from ehrbench.agents.tools.shell import ShellTools
from ehrbench.llm.tool_chat import ToolCall

UNSAFE = "unsafe: unit test of the tool's text"


def _call(tools: ShellTools, command: str) -> str:
    arguments = {"command": command}
    return tools.call(ToolCall("c1", "run_shell", arguments, json.dumps(arguments)))


def test_the_answer_has_the_status_and_both_streams(tmp_path):
    tools = ShellTools(tmp_path, isolation=UNSAFE, command_timeout_s=10, budget_s=60)
    answer = _call(tools, "echo out; echo err >&2; exit 3")
    assert answer == "exit status 3\n--- stdout ---\nout\n\n--- stderr ---\nerr\n"
    assert [spec.name for spec in tools.specs] == ["run_shell"]
    assert tools.call(ToolCall("c2", "run_shell", {}, "{}")).startswith("Error: missing required argument(s) 'command'")


def test_a_slow_command_is_killed_and_the_spent_budget_refuses_the_next(tmp_path):
    tools = ShellTools(tmp_path, isolation=UNSAFE, command_timeout_s=1, budget_s=1.5)
    slow = _call(tools, "sleep 5")
    assert slow.startswith("Error: killed: wall-clock timeout after 1 s")
    assert _call(tools, "echo quick").startswith("exit status 0")  # 0.5 s left: still runs
    tools.spent_s = 1.5
    assert _call(tools, "echo late") == ("Error: the task's time budget of 1.5 s of commands is spent; "
                                         "submit now")
