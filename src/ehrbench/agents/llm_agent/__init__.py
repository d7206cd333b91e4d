"""The LLM agent: one model behind a tool-calling interface, doing each suite the way its benchmark's agents do.

`core` holds `LlmAgent` and what every suite shares (its models, the ReAct loop with its one nudge, the database
tools, the prompt templates); each suite's own loop is a module of its own, registered below by suite name:

- `ehrsql`: EHRSQL-2024 text-to-SQL, single turn or a ReAct agent with the EHR-ChatQA database tools;
- `chatqa`: EHR-ChatQA, a conversation with a simulated user who reveals what they want one detail at a time;
- `fhir`: FHIR-AgentBench, tools over the build's FHIR resources, a free-text answer and its retrieval;
- `dq`: the data-quality audit, flagging the rows the agent judges erroneous;
- `noteqa`: EHRNoteQA, one reply to its published prompt over a patient's discharge summaries;
- `workspace`: the workspace suites (meds_conversion), a shell in the trial's copy of the task folder.

A new suite is a module with `SUITE` (its name) and `run(agent, view) -> AgentAnswer`, added to the tuple below. Its
prompts go in prompts/ as templates (see core.prompt), not in Python strings.
"""

from ehrbench.agents.llm_agent import chatqa, dq, ehrsql, fhir, noteqa, workspace
from ehrbench.agents.llm_agent.core import LlmAgent, register_suite

for _suite in (ehrsql, chatqa, fhir, dq, noteqa):
    register_suite(_suite.SUITE, _suite.run)
for _name in workspace.SUITES:
    register_suite(_name, workspace.run)

__all__ = ["LlmAgent"]
