"""FHIR-AgentBench's five agent designs (glee4810/FHIR-AgentBench `agent/*.py`, `utils/core_utils.py`;
docs/benchmarks.md#fhir-agentbench-agent-designs), chosen with the option `fhir_variant`:

- `single_turn_query_generator` (single-turn Query Generator): call 1 offers fhir_request_get; call 2 answers.
- `single_turn_retriever` (single-turn Retriever): call 1 offers get_resources_by_patient_fhir_id; call 2 answers.
- `single_turn_retriever_code` (single-turn Retriever + Code): call 1 the retriever; call 2 execute_python_code
  (its first call runs); call 3 answers.
- `multi_turn_retriever` (multi-turn Retriever): at most 30 calls offering both resource tools, until a reply
  without tool calls says "The final answer is:".
- `multi_turn_retriever_code` (multi-turn Retriever + Code): the same with execute_python_code.

Every call of the first reply runs (parallel calls). The model sees a retrieval's whole output (`str` of the dict),
except in the code designs, where it sees `retrieved_fhir_resources['<type>'] (<n> items)` and the code reads the
resources. Before each model call the input is counted (cl100k, `ehrbench.llm.token_count`); over 32,000 tokens the
trial ends with the answer "Error: Input tokens exceeded: <n> > 32000". The answer is the final reply's whole text
(judged as free text); the retrieval scored is `retrieved_resources` at the end (a type fetched twice counts its last
fetch). Where the published agent would raise (malformed arguments, a retrieval of a type its output lacks), the
trial ends with "Error: <what>" as its answer, the way FHIR-AgentBench scores a failed question: wrong."""

from __future__ import annotations

from dataclasses import dataclass

from ehrbench.agents.llm_agent.core import LlmAgent, prompt
from ehrbench.agents.llm_agent.fhir_index import search_index
from ehrbench.agents.tools.fhir_agentbench import (
    SPECS,
    SUPPORTED_TYPES,
    HttpSource,
    IndexSource,
    PublishedFhirTools,
)
from ehrbench.llm.token_count import count_messages
from ehrbench.llm.tool_chat import ChatTurn, ToolCall, Usage, assistant_message
from ehrbench.tasks import AgentAnswer, TaskView

MAX_INPUT_TOKENS = 32_000
MAX_ITERATIONS = 30
FINAL_ANSWER = "the final answer is:"
RESOURCE_TOOLS = ("get_resources_by_patient_fhir_id", "get_resources_by_resource_id")
CODE_TOOL = "execute_python_code"


@dataclass(frozen=True)
class Design:
    tools: tuple[str, ...]  # offered in the first call (single-turn) or in every call (multi-turn)
    multi_turn: bool = False
    code: bool = False


DESIGNS = {
    "single_turn_query_generator": Design(("fhir_request_get",)),
    "single_turn_retriever": Design(("get_resources_by_patient_fhir_id",)),
    "single_turn_retriever_code": Design(("get_resources_by_patient_fhir_id",), code=True),
    "multi_turn_retriever": Design(RESOURCE_TOOLS, multi_turn=True),
    "multi_turn_retriever_code": Design((*RESOURCE_TOOLS, CODE_TOOL), multi_turn=True, code=True),
}


class _Ended(Exception):
    """The trial's answer is decided: `answer` (with `stop_reason`), as FHIR-AgentBench's agent returns it."""

    def __init__(self, answer: str, stop_reason: str, keep_retrieved: bool = True):
        super().__init__(answer)
        self.answer, self.stop_reason, self.keep_retrieved = answer, stop_reason, keep_retrieved


class _Trial:
    def __init__(self, agent: LlmAgent, view: TaskView, variant: str, tools: PublishedFhirTools):
        design = DESIGNS[variant]
        self.agent, self.design, self.tools = agent, design, tools
        self.model = agent.chat_model()
        listed = (*design.tools, CODE_TOOL) if design.code and not design.multi_turn else design.tools
        fields = {"types": ", ".join(SUPPORTED_TYPES), "rules": prompt("fhir_agentbench_rules"),
                  "code_pointers": prompt("fhir_agentbench_code_pointers"), "tools": ", ".join(listed)}
        system = prompt(f"fhir_agentbench_{variant}", **fields)
        self.messages: list[dict] = [{"role": "system", "content": system},
                                     {"role": "user", "content": question_input(view)}]
        self.usage = Usage()
        self.model_calls = 0
        self.tool_calls = 0

    def ask(self, tool_names: tuple[str, ...]) -> ChatTurn:
        tokens = count_messages(self.messages)
        if tokens > MAX_INPUT_TOKENS:
            raise _Ended(f"Error: Input tokens exceeded: {tokens} > {MAX_INPUT_TOKENS}", "input_tokens_exceeded")
        options = self.agent.config.options
        turn = self.model.chat(self.messages, [SPECS[name] for name in tool_names], temperature=options.temperature,
                               max_tokens=options.max_tokens)
        self.model_calls += 1
        self.usage += turn.usage
        self.messages.append(assistant_message(turn))
        return turn

    def run_tool(self, call: ToolCall, allowed: tuple[str, ...], *, keep_retrieved: bool = True) -> None:
        if call.name not in allowed:
            named = sorted(allowed, key=lambda name: name != CODE_TOOL)  # its messages name the code tool first
            expected = " or ".join(f"'{name}'" for name in named)
            raise _Ended(f"Expected {expected} tool call, but got '{call.name}'", "unexpected_tool", keep_retrieved)
        if call.error is not None or not isinstance(call.arguments, dict):
            raise _Ended(f"Error: the arguments of {call.name} are not JSON: {call.error}", "error", keep_retrieved)
        self.tool_calls += 1
        result = self.tools.run(call.name, call.arguments)
        content = result.text
        if self.design.code and call.name != CODE_TOOL:
            kind = call.arguments.get("resource_type")
            if result.output and kind not in result.output:  # the published agent raises KeyError here
                raise _Ended(f"Error: KeyError: {kind!r}", "error", keep_retrieved)
            content = f"retrieved_fhir_resources['{kind}'] ({len(result.output[kind]) if result.output else 0} items)"
        self.messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content})


def question_input(view: TaskView) -> str:
    """The user message (its curate_input_dataset): the question, the patient's FHIR id, the assumption."""
    text = f"Question: {view.instruction}\nContext:\nPatient FHIR ID is {view.patient_fhir_id}."
    return text + (f"\n{view.context}" if view.context else "")


def run(agent: LlmAgent, view: TaskView) -> AgentAnswer:
    base_url = agent.config.options.fhir_base_url
    source = HttpSource(base_url, timeout_s=agent.config.options.timeout_s) if base_url else IndexSource(
        search_index(view.fhir_resources))
    tools = PublishedFhirTools(source, isolation=agent.sandbox)
    trial = _Trial(agent, view, agent.config.options.fhir_variant, tools)
    keep_retrieved = True
    try:
        answer, stop_reason = (_multi_turn if trial.design.multi_turn else _single_turn)(trial)
    except _Ended as ended:
        answer, stop_reason, keep_retrieved = ended.answer, ended.stop_reason, ended.keep_retrieved
    finally:
        if isinstance(source, HttpSource):
            source.close()
    by_type = tools.retrieved_ids() if keep_retrieved else {}
    ids = list(dict.fromkeys(i for values in by_type.values() for i in values))
    return AgentAnswer(answer_text=answer, free_text=True, fhir_ids=tuple(ids), fhir_ids_by_type=by_type,
                       tool_calls=trial.tool_calls, input_tokens=trial.usage.input_tokens,
                       output_tokens=trial.usage.output_tokens, stop_reason=stop_reason,
                       transcript=trial.messages)


def _single_turn(trial: _Trial) -> tuple[str, str]:
    first = trial.design.tools
    turn = trial.ask(first)
    if not turn.tool_calls:
        raise _Ended("No tool calls found in the response", "text", keep_retrieved=not trial.design.code)
    for call in turn.tool_calls:
        trial.run_tool(call, first, keep_retrieved=not trial.design.code)
    if trial.design.code:
        turn = trial.ask((CODE_TOOL,))
        if not turn.tool_calls:
            raise _Ended("No tool calls found in the response", "text")
        trial.run_tool(turn.tool_calls[0], (CODE_TOOL,))  # only its first call runs
    final = trial.ask(())
    return final.text or "", "finished"


def _multi_turn(trial: _Trial) -> tuple[str, str]:
    for _ in range(MAX_ITERATIONS):
        turn = trial.ask(trial.design.tools)
        for call in turn.tool_calls:
            trial.run_tool(call, trial.design.tools)
        if not turn.tool_calls and FINAL_ANSWER in (turn.text or "").lower():
            return turn.text or "", "finished"
    return "No final answer reached within iteration limit.", "max_iterations"
