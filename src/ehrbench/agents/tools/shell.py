"""`run_shell`, a terminal agent's one tool in a workspace task: a shell command in the task's folder, confined
(ehrbench.agents.sandbox.shell), within a time budget for the whole task."""

from __future__ import annotations

import time
from pathlib import Path

from ehrbench.agents.sandbox import run_shell
from ehrbench.agents.tools.base import DEFAULT_MAX_CHARS, ERROR_PREFIX, Tool, ToolError, dispatch
from ehrbench.llm.tool_chat import ToolCall, ToolSpec

RUN_SHELL = ToolSpec(
    "run_shell", "Run a shell command (sh) in the task folder, which is your working directory and keeps what you "
    "write in it. Python with pandas, pyarrow and duckdb is on the PATH; there is no network. Returns the exit status, "
    "stdout and stderr.",
    {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})


class ShellTools:
    """run_shell over one workspace: each command gets at most `command_timeout_s`, and all of them together
    `budget_s` (then every call is refused, saying so)."""

    def __init__(self, workspace: Path, *, isolation: str, command_timeout_s: float, budget_s: float,
                 max_chars: int = DEFAULT_MAX_CHARS) -> None:
        self.workspace, self.isolation = workspace, isolation
        self.command_timeout_s, self.budget_s, self.max_chars = command_timeout_s, budget_s, max_chars
        self.spent_s = 0.0
        self.specs = [RUN_SHELL]
        self._tools = {"run_shell": Tool(RUN_SHELL, self.run_shell)}

    def call(self, call: ToolCall) -> str:
        return dispatch(self._tools, call)

    def run_shell(self, command: str) -> str:
        left = self.budget_s - self.spent_s
        if left <= 0:
            raise ToolError(f"the task's time budget of {self.budget_s:g} s of commands is spent; submit now")
        started = time.monotonic()
        result = run_shell(command, self.workspace, timeout_s=min(self.command_timeout_s, left),
                           max_output_chars=self.max_chars // 2, isolation=self.isolation)
        self.spent_s += time.monotonic() - started
        status = f"killed: {result.killed_reason}" if result.killed_reason else f"exit status {result.exit_status}"
        text = f"{status}\n--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
        return (ERROR_PREFIX if result.timed_out else "") + text
