"""`LlmAgent` and what its suites share: the models (made once per process from the config, since clients are not
picklable: a Dask worker makes its own), the ReAct loop with its one nudge, the database tools, the prompt templates
and the suite registry `LlmAgent.run` dispatches through.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from pathlib import Path

from ehrbench.agents.config import AgentConfig
from ehrbench.agents.react import Finisher, LoopOutcome, TextHandler, react_loop
from ehrbench.agents.tools.base import Toolbox
from ehrbench.agents.tools.database import DatabaseTools
from ehrbench.agents.tools.similarity import ValueSimilarity
from ehrbench.agents.tools.web_search import DISABLED, WebSearchProvider, provider_for
from ehrbench.llm.chat import embedding_model
from ehrbench.llm.prices import cost_usd
from ehrbench.llm.tool_chat import ToolChatModel, ToolSpec, Usage
from ehrbench.llm.tools import tool_chat_model
from ehrbench.questions.chatqa import LayTerms, load_lay_terms
from ehrbench.tasks import AgentAnswer, TaskView

ANSWER_ROWS = 100  # EHRSQL-2024 compares the first 100 rows

ABSTAIN = ToolSpec("abstain", "Decline to answer because the question cannot be answered from the records "
                   "(say why). Use it instead of guessing.",
                   {"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]})

# A suite's loop: the agent (its models, loop and tools) and the task in, the answer out.
SuiteRunner = Callable[["LlmAgent", TaskView], AgentAnswer]
_SUITES: dict[str, SuiteRunner] = {}


def register_suite(suite: str, runner: SuiteRunner) -> None:
    """Make `runner` the agent's loop for `suite` (the package's __init__ registers each suite module)."""
    _SUITES[suite] = runner


class LlmAgent:
    """An agent backed by a tool-calling model; `api_key` is resolved by the caller (environment or secret)."""

    def __init__(self, config: AgentConfig, api_key: str | None = None, *, sandbox: str = "bubblewrap",
                 validator_gold: Mapping[tuple[str, str], str | None] | None = None,
                 task_types: Mapping[tuple[str, str], str | None] | None = None) -> None:
        if config.kind != "llm":
            raise ValueError(f"agent {config.name!r} is not an llm agent")
        self.config = config
        self.name = config.name
        self.sandbox = sandbox  # how its SQL and Python are isolated; recorded in each result row
        self._api_key = api_key
        # (suite, task id) -> the gold SQL of a chatqa task, which the harness hands over for the simulated-user
        # validator alone (EHR-ChatQA's validator reads it); never sent to the agent's model or the simulated user
        self._validator_gold = dict(validator_gold or {})
        # (suite, task id) -> EHR-ChatQA's task type (incre | adapt) of a chatqa task: the published agent's rules
        # hold the grading rules of its task type (glee4810/EHR-ChatQA src/envs/rules.py); unknown: both
        self._task_types = dict(task_types or {})

    def __repr__(self) -> str:  # never the key
        return f"LlmAgent({self.config.name!r}, model={self.config.model!r})"

    def run(self, view: TaskView) -> AgentAnswer:
        answer = _SUITES[view.suite](self, view)
        answer.model = self.config.model
        if self._offers_database_search(view):
            answer.value_search = self.value_similarity().mode
            answer.web_search = provider.name if (provider := self.web_search()) is not None else DISABLED
        answer.cost_usd = cost_usd(self.model_name(), Usage(answer.input_tokens, answer.output_tokens))
        return answer

    def chat_model(self, spec: str | None = None) -> ToolChatModel:
        """The agent's model, or another (simulated user, validator) that reads its key from the environment."""
        options = self.config.options
        own = spec in (None, self.config.model)
        key = self._api_key or (os.environ.get(options.api_key_env) if options.api_key_env else None)
        return _tool_model(spec or self.config.model, key if own else None, options.timeout_s, options.max_retries)

    def validator_gold_sql(self, view: TaskView) -> str | None:
        """The gold SQL the simulated-user validator reads for this task (None when the harness gave none)."""
        return self._validator_gold.get((view.suite, view.task_id))

    def task_type(self, view: TaskView) -> str | None:
        """EHR-ChatQA's task type of this task (incre | adapt), None when the harness gave none."""
        return self._task_types.get((view.suite, view.task_id))

    def value_similarity(self) -> ValueSimilarity:
        """How value_similarity_search ranks for this agent (shared by its trials in this process)."""
        options = self.config.options
        return _value_similarity(options.value_search_synonyms, options.embedding_model, options.timeout_s,
                                 options.max_retries)

    def web_search(self) -> WebSearchProvider | None:
        """The web_search provider of this agent, None when the tool is disabled (the default)."""
        return _web_search(self.config.options.web_search, self.config.options.timeout_s)

    def _offers_database_search(self, view: TaskView) -> bool:
        """Whether the suite's loop offers all the EHR-ChatQA tools (value_similarity_search, web_search)."""
        return view.suite == "chatqa" or (view.suite == "ehrsql" and self.config.options.ehrsql_mode == "tools")

    def model_name(self) -> str:
        """The model's own name, without provider and endpoint (`llm:openai:gpt-4o@…` → gpt-4o)."""
        return self.config.model.split(":", 1)[1].split("@", 1)[0]

    def loop(self, messages: list[dict], toolbox: Toolbox, finishers: list[Finisher],
             on_text: TextHandler | None = None) -> LoopOutcome:
        """The ReAct loop over the agent's model; a text reply gets one nudge to finish with a tool unless the
        suite handles text itself (`on_text`: a conversation passes it to the user)."""
        options = self.config.options
        if on_text is None:
            on_text = _nudge_once([f.spec.name for f in finishers])
        return react_loop(self.chat_model(), messages, toolbox, finishers, max_actions=options.max_actions,
                          temperature=options.temperature, max_tokens=options.max_tokens, on_text=on_text)

    def database_tools(self, database: Path, tools: tuple[str, ...] | None = None) -> DatabaseTools:
        """EHR-ChatQA's database tools over `database`, in the agent's sandbox: all of them (web_search too when a
        provider is configured), or only the `tools` named."""
        options = self.config.options
        kwargs = {"tools": tools} if tools else {"web_search": self.web_search()}
        return DatabaseTools(database, max_rows=ANSWER_ROWS, timeout_s=options.sql_timeout_s,
                             similarity=self.value_similarity(), isolation=self.sandbox, **kwargs)


def prompt(name: str, **fields: str) -> str:
    """The prompt template prompts/<name>.md filled in by str.format. The file's final newline is there for editors,
    not part of the prompt (tests/unit/test_llm_agent_prompts.py holds every rendered prompt to its exact text)."""
    return _template(name).format(**fields)


def base_answer(outcome: LoopOutcome, messages: list[dict]) -> AgentAnswer:
    """The answer fields every suite fills the same way from its loop."""
    return AgentAnswer(tool_calls=outcome.actions, tool_errors=outcome.tool_errors,
                       input_tokens=outcome.usage.input_tokens, output_tokens=outcome.usage.output_tokens,
                       stop_reason=outcome.stop_reason, transcript=messages)


def _nudge_once(tool_names: list[str]) -> TextHandler:
    nudged = []

    def on_text(_text: str) -> str | None:
        if nudged:
            return None
        nudged.append(True)
        return prompt("nudge", tools=", ".join(tool_names))

    return on_text


@cache
def _template(name: str) -> str:
    text = resources.files(__package__).joinpath("prompts").joinpath(f"{name}.md").read_text(encoding="utf-8")
    return text.removesuffix("\n")


@cache
def _tool_model(spec: str, api_key: str | None, timeout_s: float, max_retries: int) -> ToolChatModel:
    """One client per model per process (clients hold connection pools; trials share them)."""
    return tool_chat_model(spec, api_key=api_key, timeout_s=timeout_s, max_retries=max_retries)


@cache
def _web_search(spec: str | None, timeout_s: float) -> WebSearchProvider | None:
    return provider_for(spec, timeout_s)


@cache
def _synonyms() -> LayTerms:
    """The curated synonym table, read once per process."""
    return load_lay_terms()


@cache
def _value_similarity(synonyms: bool, embedding_spec: str | None, timeout_s: float,
                      max_retries: int) -> ValueSimilarity:
    """One per process and setting: its embedding client and cached value embeddings serve every trial."""
    embedder = (embedding_model(embedding_spec, timeout_s=timeout_s, max_retries=max_retries)
                if embedding_spec else None)
    return ValueSimilarity(synonyms=_synonyms() if synonyms else None, embedder=embedder)
