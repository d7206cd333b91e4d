"""Which agents a run evaluates: a name, a kind (oracle, abstain, llm) and, for an LLM agent, its model and options.

On the command line an agent is a spec string — `oracle`, `abstain`, `llm:<model>@<base_url>` (an OpenAI-compatible
server: vLLM, Ollama, llama.cpp), `llm:openai:<model>[@<base_url>]` or `llm:gemini:<model>` — with options given as
`key=value` pairs; a flow parameter may also be the same as a mapping (`{"name": ..., "model": ..., "options":
{...}}`). The name is the agent's column value in the results, so names must be unique within a run.

API keys never live in the config (it is recorded with the run): an option names where the key comes from — an
environment variable (`api_key_env`) or a Prefect Secret block (`api_key_secret`, resolved by the flow).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ehrbench.errors import ConfigError
from ehrbench.llm.chat import ModelSpec
from ehrbench.parameter_errors import one_line

BASELINES = ("oracle", "abstain")
WEB_SEARCH_DISABLED = "disabled"
AGENT_SPEC_FORM = "oracle, abstain, llm:<model>@<base_url>, llm:openai:<model>[@<base_url>] or llm:gemini:<model>"


class LlmOptions(BaseModel):
    """How an LLM agent works; every field has the published benchmarks' default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ehrsql_mode: Literal["single_turn", "tools"] = "tools"  # EHRSQL-2024 text-to-SQL, or a ReAct agent with tools
    # ehrbench's FHIR tool sets (retriever, search, code) or FHIR-AgentBench's five published agent designs
    # (ehrbench.agents.llm_agent.fhir_agentbench)
    fhir_variant: Literal["retriever", "search", "code", "single_turn_query_generator", "single_turn_retriever",
                          "single_turn_retriever_code", "multi_turn_retriever", "multi_turn_retriever_code"] = "code"
    # the fhir suite's tools ask this FHIR R4 server over HTTP (`ehrbench fhir serve`, HAPI, a cloud store) instead of
    # reading the build's view in-process
    fhir_base_url: str | None = Field(None, pattern=r"^https?://\S+$", description="FHIR R4 base URL.")
    # chatqa counts its replies to the user as steps too, as EHR-ChatQA's agent loop does
    max_actions: int = Field(30, ge=1, le=200, description="Tool calls per trial (EHR-ChatQA: 30).")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature (the APIs' own range).")
    # 10^6: the largest context windows offered (Gemini); more is a typo, not a request
    max_tokens: int | None = Field(None, ge=1, le=1_000_000, description="Tokens per model reply.")
    context_tokens: int | None = Field(None, ge=1, le=10_000_000, description=(
        "The model's context window; a noteqa prompt that does not fit with its reply is reported "
        "(context_exceeded), never truncated."))
    # An hour per model call, ten minutes per query: a trial stuck longer blocks its endpoint slot for everyone
    timeout_s: float = Field(60.0, gt=0, le=3600, description="Seconds per model call.")
    max_retries: int = Field(4, ge=0, le=10, description=(
        "The SDK's own retries of 429/5xx/timeouts, per call."))
    sql_timeout_s: float = Field(60.0, gt=0, le=600, description=(
        "Seconds per SQL query of the agent (EHR-ChatQA: 60; sql_execute's timeout argument may ask for less)."))
    user_model: str | None = None  # the chatqa simulated user (default: the agent's model)
    validator_model: str | None = None  # the post-hoc check of the simulated user (default: the user's model)
    # EHR-ChatQA runs a conversation at most 10 times (run.py --max_retry 10): the first run and 9 re-runs
    user_reruns: int = Field(9, ge=0, le=20, description="Re-runs of a conversation the validator rejects.")
    max_user_turns: int = Field(10, ge=1, le=50, description="Turns of the simulated user per conversation.")
    embedding_model: str | None = None  # value_similarity_search ranks by embeddings when set (else lexically)
    # the curated synonym table in value_similarity_search: off by default, because the chatqa instructions are
    # written from it (recorded per trial in the results' value_search column)
    value_search_synonyms: bool = False
    # web_search: disabled (default, offline: the tool is not offered), the http(s) URL of a search endpoint, or
    # the name of a registered provider (ehrbench.agents.tools.web_search)
    web_search: str | None = None
    # the dq suite's interface: ehrbench's tools over a read-only copy of the tables (flag_rows, submit_audit), or
    # HealthAgentBench's terminal: run_shell in a copy of the task folder, where the agent writes flagged_rows.csv
    dq_interface: Literal["tools", "terminal"] = "tools"
    shell_timeout_s: float = Field(120.0, gt=0, le=3600, description="Seconds per run_shell command.")
    workspace_budget_s: float = Field(1800.0, gt=0, le=86400, description=(
        "Seconds of run_shell commands per workspace task (then each call is refused)."))
    api_key_env: str | None = None  # environment variable holding the key (default: the SDK's own variable)
    api_key_secret: str | None = None  # name of a Prefect Secret block holding the key

    @model_validator(mode="after")
    def _model_specs(self) -> LlmOptions:
        for name in ("user_model", "validator_model", "embedding_model"):
            value = getattr(self, name)
            if value is not None:
                ModelSpec.parse(value)  # raises naming the spec and the expected form
        if self.web_search is not None:  # the tools load only when a provider is asked for
            from ehrbench.agents.tools.web_search import check_provider_spec

            check_provider_spec(self.web_search)  # raises naming the accepted forms
        return self

    @field_validator("web_search")
    @classmethod
    def _disabled_is_none(cls, value: str | None) -> str | None:
        return None if value is None or value.strip() in ("", WEB_SEARCH_DISABLED) else value.strip()


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    kind: Literal["oracle", "abstain", "llm"]
    model: str | None = None  # a model spec (ehrbench.llm.ModelSpec) for kind llm
    options: LlmOptions = LlmOptions()

    @model_validator(mode="after")
    def _model_for_llm(self) -> AgentConfig:
        if self.kind == "llm":
            if not self.model:
                raise ValueError(f"agent {self.name!r}: an llm agent needs a model spec")
            ModelSpec.parse(self.model)
        elif self.model:
            raise ValueError(f"agent {self.name!r}: a {self.kind} agent takes no model")
        elif "options" in self.model_fields_set:
            raise ValueError(f"agent {self.name!r}: a {self.kind} agent takes no options")
        return self

    @property
    def endpoint(self) -> str | None:
        """What rate limits this agent's calls: the server of its base URL, or the provider's API."""
        if self.kind != "llm":
            return None
        spec = ModelSpec.parse(self.model)
        return spec.base_url.split("://", 1)[-1].split("/", 1)[0] if spec.base_url else spec.provider


def parse_agent(spec: str | dict, options: dict | None = None) -> AgentConfig:
    """An agent from a spec string (plus `options` for an llm agent) or from a mapping; errors name the spec and
    the expected form."""
    try:
        if isinstance(spec, dict):
            if options:
                raise ConfigError("options of a mapping go into its own 'options' key")
            data = dict(spec)
            data.setdefault("kind", "llm" if data.get("model") else data.get("name"))
            data.setdefault("name", data["kind"] if data["kind"] in BASELINES else f"llm:{data.get('model')}")
            return AgentConfig.model_validate(data)
        text = spec.strip()
        if text in BASELINES:
            if options:
                raise ConfigError(f"agent {text!r} takes no options")
            return AgentConfig(name=text, kind=text)
        if not text.startswith("llm:"):
            raise ConfigError(f"unknown agent {text!r}; expected {AGENT_SPEC_FORM}")
        model = text.removeprefix("llm:")
        if not model.startswith(("openai:", "gemini:")):
            model = f"openai:{model}"
        return AgentConfig(name=text, kind="llm", model=model, options=LlmOptions(**(options or {})))
    except ValidationError as exc:  # raised by LlmOptions (options of a string spec) or AgentConfig (a mapping)
        model = LlmOptions if exc.title == LlmOptions.__name__ else AgentConfig
        raise ConfigError(f"agent {spec!r}: {one_line(exc, model)}") from None


def parse_agents(specs: list[str | dict], options: dict | None = None) -> list[AgentConfig]:
    """Agents with unique names; `options` apply to every llm agent given as a string."""
    agents = [parse_agent(spec, options if isinstance(spec, str) and spec.strip() not in BASELINES else None)
              for spec in specs]
    names = [agent.name for agent in agents]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigError(f"agent name(s) {', '.join(duplicates)} given more than once; names must be unique in a run")
    return agents


def parse_options(pairs: list[str]) -> dict:
    """`key=value` pairs of the command line as option values (numbers and booleans typed by pydantic)."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"agent option {pair!r}: expected key=value (keys: {', '.join(LlmOptions.model_fields)})")
        options[key.strip()] = value.strip()
    return options
