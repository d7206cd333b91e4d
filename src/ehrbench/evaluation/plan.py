"""The plan of an evaluation run, made once from its agent configurations before any trial: the agents (with the API
keys their configurations point to and the isolation of their code), the model endpoint's concurrency limit each agent
runs under, the trials still to run given those an earlier run of the same id completed, and the batches they run in.

The orchestrator creates the limits, holds their slots and runs the batches; API keys kept in a secret store come
through the `load_secret` it passes (the flow: Prefect Secret blocks), so this module stays Prefect-free."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass

from ehrbench.agents.baselines import make_agents
from ehrbench.agents.config import AgentConfig
from ehrbench.agents.sandbox import isolation
from ehrbench.errors import ConfigError
from ehrbench.tasks import Agent, EvalTask

Trial = tuple[Agent, EvalTask, int]  # an agent on a task, the trial-th time
# (agent, suite, task id, trial) of a completed trial: results.TRIAL_KEY. A task set's task id is `<task set>/<id>`
# (ehrbench.tasksets.model.task_id), so a run mixing generated suites and task sets keys every trial apart
TrialKey = tuple[str, str, str, int]

ENDPOINT_LIMIT_PREFIX = "llm-endpoint:"


def endpoint_limits(configs: Sequence[AgentConfig]) -> dict[str, str]:
    """Agent name → the name of the global concurrency limit of its model endpoint (one limit per endpoint, shared by
    the agents calling it); an agent without an endpoint (oracle, abstain) is left out."""
    return {config.name: ENDPOINT_LIMIT_PREFIX + config.endpoint for config in configs if config.endpoint}


def secret_api_keys(configs: Sequence[AgentConfig], load_secret: Callable[[str], str]) -> dict[str, str]:
    """Agent name → API key, for the LLM agents whose key is kept in a secret store (option `api_key_secret`: the
    secret's name). `load_secret(name)` returns the secret's value and raises ValueError when there is none; the
    error then names the agent and the secret."""
    keys = {}
    for config in configs:
        name = config.options.api_key_secret if config.kind == "llm" else None
        if name:
            try:
                keys[config.name] = load_secret(name)
            except ValueError as exc:  # Prefect raises a plain ValueError for a missing block
                raise ConfigError(f"agent {config.name!r}: api_key_secret {name!r}: {exc}") from None
    return keys


def pending_trials(agents: Sequence[Agent], tasks: Sequence[EvalTask], trials: int,
                   completed: Collection[TrialKey]) -> list[Trial]:
    """Every (agent, task, trial) whose key is not in `completed`, ordered by agent, then task, then trial."""
    return [(agent, task, trial) for agent in agents for task in tasks for trial in range(trials)
            if (agent.name, *task.key, trial) not in completed]


def batches_by_agent(pending: Sequence[Trial], size: int) -> Iterator[list[Trial]]:
    """Consecutive trials of one agent, at most `size` of them (`pending` is ordered by agent): a batch calls one
    endpoint and holds one limit."""
    start = 0
    while start < len(pending):
        agent = pending[start][0]
        end = start
        while end < len(pending) and end - start < size and pending[end][0] is agent:
            end += 1
        yield list(pending[start:end])
        start = end


@dataclass(frozen=True)
class Batch:
    trials: list[Trial]  # of one agent
    limit: str | None  # the concurrency limit of that agent's endpoint; None: it calls no endpoint


@dataclass(frozen=True)
class RunPlan:
    agents: list[Agent]
    tasks: list[EvalTask]
    trials: int  # per task
    sandbox: str | None  # how the LLM agents' SQL and Python are isolated (agents.sandbox.isolation); None: no LLM
    limits: dict[str, str]  # agent name → its endpoint's concurrency limit (endpoint_limits)
    pending: list[Trial]
    done_before: int  # trials a run of this id completed earlier

    def batches(self, size: int) -> Iterator[Batch]:
        for trials in batches_by_agent(self.pending, size):
            yield Batch(trials, self.limits.get(trials[0][0].name))

    def describe(self) -> str:
        return (f"{_count(len(self.agents), 'agent')} × {_count(len(self.tasks), 'task')} × "
                f"{_count(self.trials, 'trial')}: {len(self.pending):,} to run ({self.done_before:,} done before)")


def plan_run(configs: Sequence[AgentConfig], tasks: Sequence[EvalTask], trials: int, completed: Collection[TrialKey],
             *, load_secret: Callable[[str], str], allow_unsafe_sandbox: bool = False) -> RunPlan:
    """The run of `configs` on `tasks`, `trials` times each, skipping the `completed` trials. Raises before any
    trial when the LLM agents' code cannot be isolated and `allow_unsafe_sandbox` is not set (SandboxUnavailable,
    saying what to do), or when an agent's secret is missing (secret_api_keys)."""
    sandbox = isolation(allow_unsafe=allow_unsafe_sandbox) if any(c.kind == "llm" for c in configs) else None
    agents = make_agents(configs, {task.key: task.gold for task in tasks}, secret_api_keys(configs, load_secret),
                         sandbox=sandbox)
    return RunPlan(agents=agents, tasks=list(tasks), trials=trials, sandbox=sandbox, limits=endpoint_limits(configs),
                   pending=pending_trials(agents, tasks, trials, completed), done_before=len(completed))


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
