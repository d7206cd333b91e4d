"""The `fhir` suite (FHIR-AgentBench): ehrbench's retriever, search-query or code-interpreter tools (`fhir_variant`)
over the build's FHIR resources, then `submit_answer(answer)` in free text or `abstain`; the resources the agent
retrieved are its retrieval, scored for precision and recall. The paper's own five designs are `fhir_agentbench`.
"""

from __future__ import annotations

from ehrbench.agents.llm_agent import fhir_agentbench
from ehrbench.agents.llm_agent.core import ABSTAIN, LlmAgent, base_answer, prompt
from ehrbench.agents.llm_agent.fhir_index import search_index
from ehrbench.agents.react import Finisher
from ehrbench.agents.tools.fhir import FhirTools
from ehrbench.fhir.http_index import HttpIndex
from ehrbench.llm.tool_chat import ToolSpec
from ehrbench.tasks import AgentAnswer, TaskView

SUITE = "fhir"

SUBMIT_TEXT = ToolSpec("submit_answer", "Give your final answer: the value(s) asked for, as short text; list several "
                       "values separated by commas.",
                       {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]})


def run(agent: LlmAgent, view: TaskView) -> AgentAnswer:
    options = agent.config.options
    if options.fhir_variant in fhir_agentbench.DESIGNS:
        return fhir_agentbench.run(agent, view)
    remote = HttpIndex(options.fhir_base_url, timeout_s=options.timeout_s) if options.fhir_base_url else None
    tools = FhirTools(view.fhir_resources, index=remote or search_index(view.fhir_resources),
                      variant=options.fhir_variant, isolation=agent.sandbox)
    try:
        return _run(agent, view, tools)
    finally:
        if remote is not None:
            remote.close()


def _run(agent: LlmAgent, view: TaskView, tools: FhirTools) -> AgentAnswer:
    system = prompt("fhir_system", context=view.context or "", patient=view.patient_fhir_id or "not given")
    messages = [{"role": "system", "content": system}, {"role": "user", "content": view.instruction}]
    outcome = agent.loop(messages, tools, [Finisher(SUBMIT_TEXT, lambda call: None),
                                           Finisher(ABSTAIN, lambda call: None)])
    answer = base_answer(outcome, messages)
    answer.fhir_ids = tuple(tools.retrieved_ids)
    answer.fhir_ids_by_type = tools.retrieved_by_type()
    if outcome.finish is not None and outcome.finish.name == "abstain":
        answer.abstained = True
    elif outcome.finish is not None:
        answer.answer_text = str(outcome.finish.arguments.get("answer", ""))
        answer.free_text = True
    return answer
