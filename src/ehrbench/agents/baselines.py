"""Reference agents that need no model. `oracle` answers every task with its gold — every suite must score 100 %,
the harness's self-check; `abstain` declines everything — the floor of the reliability score and F1."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow.parquet as pq

from ehrbench.agents.config import AgentConfig
from ehrbench.layout import AuditTaskLayout
from ehrbench.metrics.retrieval import ids_by_type
from ehrbench.noteqa.published import LETTERS
from ehrbench.tasks import WORKSPACE_SUITES, Agent, AgentAnswer, Gold, TaskView
from ehrbench.workspace.verify import family


class OracleAgent:
    name = "oracle"

    def __init__(self, gold: Mapping[tuple[str, str], Gold]) -> None:
        self._gold = gold  # the harness hands the oracle, and only the oracle, the gold of the run's tasks

    def run(self, view: TaskView) -> AgentAnswer:
        gold = self._gold[(view.suite, view.task_id)]
        if view.suite in WORKSPACE_SUITES:  # the family's reference solution, run in the trial's workspace
            family(view.suite).solve(gold.workspace_task_dir, view.workspace)
            return AgentAnswer(transcript=[{"role": "agent", "content": "ran the reference solution"}])
        if view.suite == "dq":
            labels = pq.read_table(AuditTaskLayout(gold.dq_task_dir).labels, columns=["table", "row_id"])
            return AgentAnswer(flagged_rows=sorted(set(zip(*labels.to_pydict().values(), strict=True))),
                               transcript=[{"role": "agent", "content": "flagged the labelled rows"}])
        if view.suite == "noteqa":  # the correct option, found among the options as this trial shows them
            text = gold.answer_text or ""
            if view.qa_format == "multichoice":
                text = f"{LETTERS[view.choices.index(text)]}. {text}"
            return AgentAnswer(answer_text=text, transcript=[{"role": "agent", "content": text}])
        if not gold.is_answerable:
            return AgentAnswer(abstained=True, transcript=[{"role": "agent", "content": "abstained"}])
        by_type = ids_by_type(zip(gold.fhir_types, gold.fhir_ids, strict=False)) if gold.fhir_types else None
        return AgentAnswer(answer_text=gold.answer_text, sql=gold.sql, fhir_ids=gold.fhir_ids,
                           fhir_ids_by_type=by_type,
                           transcript=[{"role": "agent", "content": gold.answer_text}])


class AbstainAgent:
    name = "abstain"

    def run(self, view: TaskView) -> AgentAnswer:
        if view.suite in WORKSPACE_SUITES:
            return AgentAnswer(transcript=[{"role": "agent", "content": "left the workspace as it was"}])
        if view.suite == "dq":
            return AgentAnswer(flagged_rows=[], transcript=[{"role": "agent", "content": "flagged nothing"}])
        return AgentAnswer(abstained=True, transcript=[{"role": "agent", "content": "abstained"}])



def make_agents(configs: list[AgentConfig], gold: Mapping[tuple[str, str], Gold],
                api_keys: Mapping[str, str] | None = None, *, sandbox: str | None = None) -> list[Agent]:
    """The agents of a run. `gold` goes to the oracle; of the chatqa gold, the SQL goes to the LLM agents'
    simulated-user validator, which reads it as EHR-ChatQA's does (never the agent, the user or the verifier), and the
    task type (IncreQA or AdaptQA) to the agent, whose published rules differ by type; `api_keys` (by agent
    name) to the LLM agents whose key the caller resolved (a Prefect Secret); the others read theirs from the
    environment. `sandbox`: the isolation of the LLM agents' SQL and Python (ehrbench.agents.sandbox.isolation),
    default bubblewrap."""
    agents: list[Agent] = []
    for config in configs:
        if config.kind == "oracle":
            agents.append(OracleAgent(gold))
        elif config.kind == "abstain":
            agents.append(AbstainAgent())
        else:
            from ehrbench.agents.llm_agent import LlmAgent  # the model SDKs load only when an LLM is evaluated

            chatqa = {key: task_gold for key, task_gold in gold.items() if key[0] == "chatqa"}
            agents.append(LlmAgent(config, (api_keys or {}).get(config.name), sandbox=sandbox or "bubblewrap",
                                   validator_gold={key: g.sql for key, g in chatqa.items()},
                                   task_types={key: g.task_type for key, g in chatqa.items()}))
    return agents
