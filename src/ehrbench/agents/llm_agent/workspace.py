"""The workspace suites (e.g. meds_conversion; docs/benchmarks.md#workspace-tasks), HealthAgentBench's setting: a shell
(run_shell) in the trial's fresh copy of the task folder, which the harness made and its family's verifier scores;
`submit_workspace()` ends. Each command has `shell_timeout_s`, all of them together `workspace_budget_s`.
"""

from __future__ import annotations

from ehrbench.agents.llm_agent.core import LlmAgent, base_answer, prompt
from ehrbench.agents.react import Finisher
from ehrbench.agents.tools.shell import ShellTools
from ehrbench.llm.tool_chat import ToolSpec
from ehrbench.tasks import WORKSPACE_SUITES, AgentAnswer, TaskView

SUITES = WORKSPACE_SUITES
SUBMIT_WORKSPACE = ToolSpec("submit_workspace", "Finish the task: the files you left in the task folder are your "
                            "submission.")


def run(agent: LlmAgent, view: TaskView) -> AgentAnswer:
    options = agent.config.options
    shell = ShellTools(view.workspace, isolation=agent.sandbox, command_timeout_s=options.shell_timeout_s,
                       budget_s=options.workspace_budget_s)
    messages = [{"role": "system", "content": prompt("workspace_system", instruction=view.instruction)},
                {"role": "user", "content": prompt("workspace_user")}]
    outcome = agent.loop(messages, shell, [Finisher(SUBMIT_WORKSPACE, lambda call: None)])
    return base_answer(outcome, messages)
