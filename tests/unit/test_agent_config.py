"""Agent configs from the command line and from flow parameters: the spec forms, options typed from strings, the
errors (naming the spec and the field) and the endpoint that rate-limits an agent."""

from __future__ import annotations

import pytest

from ehrbench.agents.config import AgentConfig, LlmOptions, parse_agent, parse_agents, parse_options


@pytest.mark.parametrize("spec, kind, model", [
    ("oracle", "oracle", None),
    ("abstain", "abstain", None),
    ("  abstain ", "abstain", None),  # surrounding blanks of a command-line value are dropped
    ("llm:qwen@http://localhost:8000/v1", "llm", "openai:qwen@http://localhost:8000/v1"),  # OpenAI-compatible
    ("llm:openai:gpt-4o", "llm", "openai:gpt-4o"),
    ("llm:openai:gpt-4o@https://proxy.example.org/v1", "llm", "openai:gpt-4o@https://proxy.example.org/v1"),
    ("llm:gemini:gemini-2.5-flash", "llm", "gemini:gemini-2.5-flash"),
    ("llm:qwen2.5:7b@http://localhost:11434/v1", "llm", "openai:qwen2.5:7b@http://localhost:11434/v1"),  # Ollama tag
])
def test_spec_strings(spec, kind, model):
    agent = parse_agent(spec)
    assert (agent.name, agent.kind, agent.model) == (spec.strip(), kind, model)
    assert agent.options == LlmOptions()  # every default


def test_the_defaults_are_the_published_benchmarks():
    options = LlmOptions()
    # EHR-ChatQA: 30 agent actions; a conversation is run at most 10 times (run.py --max_retry 10), so 9 re-runs;
    # sql_execute's timeout defaults to 60 seconds
    assert (options.ehrsql_mode, options.fhir_variant, options.max_actions, options.user_reruns) == (
        "tools", "code", 30, 9)
    assert options.sql_timeout_s == 60.0
    # value_similarity_search: lexical without an embedding model, no synonym table; web_search disabled (offline)
    assert (options.embedding_model, options.value_search_synonyms, options.web_search) == (None, False, None)
    assert (options.temperature, options.api_key_env) == (0.0, None)


@pytest.mark.parametrize("value, expected", [
    ("disabled", None), ("  ", None), ("http://127.0.0.1:9000/search", "http://127.0.0.1:9000/search"),
    (" https://search.example.org/v1 ", "https://search.example.org/v1"),
])
def test_the_web_search_option_is_disabled_or_a_provider(value, expected):
    assert parse_agent("llm:openai:m", {"web_search": value}).options.web_search == expected


def test_an_unknown_web_search_provider_is_refused_naming_the_forms():
    with pytest.raises(ValueError, match=r"agent 'llm:openai:m': .*web search provider 'tavily': expected "
                                         r"disabled, the http\(s\) URL of a search endpoint, or a registered "
                                         r"provider name"):
        parse_agent("llm:openai:m", {"web_search": "tavily"})


def test_options_given_as_command_line_strings_are_typed():
    options = parse_options(["max_actions=5", " value_search_synonyms = false", "temperature=0.5",
                             "ehrsql_mode=single_turn", "api_key_env=MY_KEY=X"])
    # parse_options only splits (at the first "="); pydantic types the values
    assert options == {"max_actions": "5", "value_search_synonyms": "false", "temperature": "0.5",
                       "ehrsql_mode": "single_turn", "api_key_env": "MY_KEY=X"}
    agent = parse_agent("llm:qwen@http://localhost:8000/v1", options)
    assert agent.options.max_actions == 5 and type(agent.options.max_actions) is int
    assert agent.options.value_search_synonyms is False
    assert agent.options.temperature == 0.5 and agent.options.ehrsql_mode == "single_turn"
    assert agent.options.api_key_env == "MY_KEY=X"
    assert agent.options.fhir_variant == "code"  # untouched options keep their default


@pytest.mark.parametrize("pair", ["max_actions", "=5", " =5"])
def test_an_option_that_is_not_key_value_is_refused_listing_the_keys(pair):
    with pytest.raises(ValueError, match=rf"agent option '{pair}': expected key=value \(keys: ehrsql_mode, "
                                         r"fhir_variant, fhir_base_url, max_actions, .*api_key_secret\)"):
        parse_options([pair])


def test_the_mapping_form():
    agent = parse_agent({"model": "openai:qwen@http://gpu:8000/v1", "options": {"max_actions": "7"}})
    assert (agent.name, agent.kind, agent.model) == ("llm:openai:qwen@http://gpu:8000/v1", "llm",
                                                      "openai:qwen@http://gpu:8000/v1")
    assert agent.options.max_actions == 7
    named = parse_agent({"name": "my-qwen", "model": "gemini:gemini-2.5-flash",
                         "options": {"fhir_variant": "search"}})
    assert (named.name, named.kind, named.options.fhir_variant) == ("my-qwen", "llm", "search")
    assert parse_agent({"name": "oracle"}) == AgentConfig(name="oracle", kind="oracle")
    assert parse_agent({"kind": "abstain"}) == AgentConfig(name="abstain", kind="abstain")


@pytest.mark.parametrize("spec, options, message", [
    ("llm:qwen@http://h:1/v1", {"max_step": "5"},
     r"agent 'llm:qwen@http://h:1/v1': max_step '5': unknown; expected one of ehrsql_mode, "),
    ("llm:qwen@http://h:1/v1", {"max_actions": "0"},
     r"agent 'llm:qwen@http://h:1/v1': max_actions '0': must be between 1 and 200 \(tool calls per trial\)"),
    ("llm:qwen@http://h:1/v1", {"max_actions": "five"}, r"max_actions 'five': must be a valid integer"),
    ("llm:qwen@http://h:1/v1", {"timeout_s": "1e9"}, r"timeout_s '1e9': must be more than 0 and at most 3600"),
    ("llm:qwen@http://h:1/v1", {"value_search_synonyms": "maybe"},
     r"value_search_synonyms 'maybe': must be a valid boolean"),
    ("llm:qwen@http://h:1/v1", {"ehrsql_mode": "multi_turn"}, r"ehrsql_mode 'multi_turn': must be 'single_turn' or "
                                                              r"'tools'"),
    ("llm:qwen@http://h:1/v1", {"user_model": "qwen"}, r"agent 'llm:qwen@http://h:1/v1': .*model spec 'qwen' is "
                                                       r"not of the form openai:<model>"),
    ("llm:gemini:gemini-2.5-flash@http://h:1", None, r"agent 'llm:gemini:gemini-2.5-flash@http://h:1': .*a Gemini "
                                                     r"model takes no base URL"),
    ("llm:", None, r"agent 'llm:': .*model spec 'openai:' is not of the form"),
    ("llm:qwen@ftp://h/v1", None, r"agent 'llm:qwen@ftp://h/v1': .*is not of the form"),
    ("gpt-4o", None, r"unknown agent 'gpt-4o'; expected oracle, abstain, llm:<model>@<base_url>"),
    ("oracle", {"max_actions": "5"}, r"agent 'oracle' takes no options"),
    ({"name": "x", "kind": "llm"}, None, r"agent \{'name': 'x', 'kind': 'llm'\}: .*an llm agent needs a model spec"),
    ({"name": "a", "kind": "abstain", "model": "openai:x"}, None, r"agent 'a': a abstain agent takes no model"),
    ({"model": "openai:x", "colour": "red"}, None,
     r"colour 'red': unknown; expected one of name, kind, model, options"),
    ({"name": "random"}, None, r"kind 'random': must be 'oracle', 'abstain' or 'llm'"),
])
def test_bad_specs_are_value_errors_naming_the_spec_and_the_field(spec, options, message):
    with pytest.raises(ValueError, match=message):
        parse_agent(spec, options)


def test_an_llm_option_on_a_baseline_mapping_is_refused():
    with pytest.raises(ValueError, match="agent 'oracle'.*options"):
        parse_agent({"name": "oracle", "options": {"max_actions": 3}})


def test_options_apply_to_every_llm_string_spec_and_names_must_be_unique():
    agents = parse_agents(["oracle", " abstain", "llm:a@http://h:1/v1", "llm:gemini:gemini-2.5-flash",
                           {"name": "own", "model": "openai:b"}], {"max_actions": "5"})
    assert [a.name for a in agents] == ["oracle", "abstain", "llm:a@http://h:1/v1", "llm:gemini:gemini-2.5-flash",
                                        "own"]
    # the baselines take no options (no error), the mapping keeps its own
    assert [a.options.max_actions for a in agents] == [30, 30, 5, 5, 30]
    with pytest.raises(ValueError, match=r"agent name\(s\) llm:a, oracle given more than once; names must be unique"):
        parse_agents(["oracle", "llm:a", "llm:b", "llm:a ", {"name": "oracle"}])
    with pytest.raises(ValueError, match="max_actions"):  # an option error still names the field
        parse_agents(["llm:a"], {"max_actions": "-1"})


@pytest.mark.parametrize("spec, endpoint", [
    ("llm:qwen@http://localhost:8000/v1", "localhost:8000"),
    ("llm:qwen@http://gpu-node", "gpu-node"),
    ("llm:openai:gpt-4o@https://proxy.example.org:8443/openai/v1/", "proxy.example.org:8443"),
    ("llm:openai:gpt-4o", "openai"),
    ("llm:gemini:gemini-2.5-flash", "gemini"),
    ("oracle", None),
    ("abstain", None),
])
def test_the_endpoint_that_rate_limits_an_agent(spec, endpoint):
    assert parse_agent(spec).endpoint == endpoint


def test_configs_are_frozen_and_hashable():
    agent = parse_agent("llm:openai:gpt-4o", {"max_actions": "5"})
    with pytest.raises(ValueError):
        agent.name = "other"
    assert hash(agent) == hash(parse_agent("llm:openai:gpt-4o", {"max_actions": 5}))
