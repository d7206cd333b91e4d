"""The plan of an evaluation run without Prefect: which trials are pending, how they are batched, which endpoint limit
each agent runs under, where API keys come from; the trial tally and the run's summary. Expected values are worked
out from the rules in the comments."""

from __future__ import annotations

import grimp
import pytest

from ehrbench.agents.baselines import AbstainAgent, OracleAgent
from ehrbench.agents.config import parse_agents
from ehrbench.evaluation import plan as plan_module
from ehrbench.evaluation.plan import (
    batches_by_agent,
    endpoint_limits,
    pending_trials,
    plan_run,
    secret_api_keys,
)
from ehrbench.evaluation.results import ResultStore
from ehrbench.evaluation.summary import rounded, summary_markdown
from ehrbench.evaluation.tally import TrialTally
from ehrbench.tasks import EvalTask, Gold, TaskView


class Named:
    def __init__(self, name: str):
        self.name = name


def tasks(*keys: str) -> list[EvalTask]:
    """Tasks named `<suite>/<task id>`."""
    return [EvalTask(TaskView(suite=key.split("/")[0], task_id=key.split("/")[1], db=None, instruction="?"), Gold())
            for key in keys]


def test_pending_skips_the_completed_trials_and_keeps_agent_task_trial_order():
    a, b = Named("a"), Named("b")
    t1, t2 = tasks("ehrsql/q1", "dq/audit")
    completed = {("a", "ehrsql", "q1", 1), ("b", "dq", "audit", 0),
                 ("c", "ehrsql", "q1", 0), ("a", "ehrsql", "q1", 5)}  # another agent, a trial beyond `trials`
    # 2 agents × 2 tasks × 2 trials = 8, less the 2 completed ones of this run's agents and trials
    assert [(agent.name, *task.key, k) for agent, task, k in pending_trials([a, b], [t1, t2], 2, completed)] == [
        ("a", "ehrsql", "q1", 0), ("a", "dq", "audit", 0), ("a", "dq", "audit", 1),
        ("b", "ehrsql", "q1", 0), ("b", "ehrsql", "q1", 1), ("b", "dq", "audit", 1)]
    assert pending_trials([a], [t1], 0, set()) == []


@pytest.mark.parametrize("size, sizes", [
    (2, [2, 1, 2, 2]),  # agent a: 3 trials → 2 + 1; agent b: 4 → 2 + 2
    (3, [3, 3, 1]),  # a: 3; b: 4 → 3 + 1
    (100, [3, 4]),  # one batch per agent, never two agents in one
    (1, [1] * 7),
])
def test_a_batch_holds_one_agent_and_at_most_size_trials_in_order(size, sizes):
    a, b = Named("a"), Named("b")
    pending = [(a, "t", k) for k in range(3)] + [(b, "t", k) for k in range(4)]
    batches = list(batches_by_agent(pending, size))
    assert [len(batch) for batch in batches] == sizes
    assert all(len({id(agent) for agent, _, _ in batch}) == 1 for batch in batches)
    assert [trial for batch in batches for trial in batch] == pending  # nothing lost, nothing reordered
    assert list(batches_by_agent([], size)) == []


def test_only_agents_with_an_endpoint_get_its_limit_one_per_endpoint():
    configs = parse_agents(["oracle", "abstain", "llm:qwen@http://gpu-box:8000/v1", "llm:openai:gpt-4o",
                            {"name": "second", "model": "openai:llama@http://gpu-box:8000/v1"}, "llm:gemini:g"])
    # the endpoint is the base URL's server, else the provider: two agents on gpu-box:8000 share one limit
    assert endpoint_limits(configs) == {
        "llm:qwen@http://gpu-box:8000/v1": "llm-endpoint:gpu-box:8000",
        "second": "llm-endpoint:gpu-box:8000",
        "llm:openai:gpt-4o": "llm-endpoint:openai",
        "llm:gemini:g": "llm-endpoint:gemini",
    }
    assert endpoint_limits(parse_agents(["oracle", "abstain"])) == {}


def test_secrets_are_loaded_for_the_agents_that_name_one_and_a_missing_one_names_agent_and_secret():
    configs = parse_agents(["oracle", "llm:openai:gpt-4o",  # its key comes from the environment
                            {"name": "kept", "model": "openai:m@http://gpu-box/v1",
                             "options": {"api_key_secret": "gpu-key"}},
                            {"name": "env", "model": "gemini:g", "options": {"api_key_env": "MY_KEY"}}])
    store = {"gpu-key": "sk-1", "unused": "sk-2"}
    asked = []

    def load_secret(name: str) -> str:
        asked.append(name)
        if name not in store:
            raise ValueError(f"Unable to find block document named {name}")
        return store[name]

    assert secret_api_keys(configs, load_secret) == {"kept": "sk-1"}
    assert asked == ["gpu-key"]  # only the secret an agent names is read
    missing = parse_agents([{"name": "lost", "model": "openai:m@http://gpu-box/v1",
                             "options": {"api_key_secret": "gone"}}])
    with pytest.raises(ValueError, match="^agent 'lost': api_key_secret 'gone': Unable to find block document named "
                                         "gone$"):
        secret_api_keys(missing, load_secret)


def test_a_plan_of_baselines_needs_no_sandbox_no_secret_and_no_limit(monkeypatch):
    monkeypatch.setattr(plan_module, "isolation", lambda allow_unsafe: pytest.fail("probed the sandbox"))
    run_tasks = tasks("ehrsql/q1", "ehrsql/q2", "dq/audit")
    completed = {("oracle", "ehrsql", "q2", 0), ("abstain", "dq", "audit", 1), ("other", "ehrsql", "q1", 0)}
    plan = plan_run(parse_agents(["oracle", "abstain"]), run_tasks, 2, completed,
                    load_secret=lambda name: pytest.fail(f"read secret {name}"))
    assert [type(agent) for agent in plan.agents] == [OracleAgent, AbstainAgent]
    assert (plan.sandbox, plan.limits, plan.done_before) == (None, {}, 3)
    # 2 agents × 3 tasks × 2 trials = 12, less the two completed trials of this run's agents
    assert len(plan.pending) == 10
    assert plan.describe() == "2 agents × 3 tasks × 2 trials: 10 to run (3 done before)"
    # batches of at most 4: oracle's 5 pending → 4 + 1, abstain's 5 → 4 + 1; no limit without an endpoint
    assert [(len(batch.trials), batch.trials[0][0].name, batch.limit) for batch in plan.batches(4)] == [
        (4, "oracle", None), (1, "oracle", None), (4, "abstain", None), (1, "abstain", None)]


def test_a_plan_hands_the_agents_their_keys_and_sandbox_and_its_batches_their_limit(monkeypatch):
    made = {}

    def make_agents(configs, gold, api_keys, *, sandbox):
        made.update(names=[c.name for c in configs], gold=set(gold), api_keys=api_keys, sandbox=sandbox)
        return [Named(c.name) for c in configs]

    monkeypatch.setattr(plan_module, "isolation", lambda allow_unsafe: "unsafe: test" if allow_unsafe else "x")
    monkeypatch.setattr(plan_module, "make_agents", make_agents)
    configs = parse_agents(["oracle", {"name": "kept", "model": "openai:m@http://gpu-box/v1",
                                       "options": {"api_key_secret": "gpu-key"}}])
    plan = plan_run(configs, tasks("ehrsql/q1"), 1, set(), load_secret={"gpu-key": "sk-1"}.__getitem__,
                    allow_unsafe_sandbox=True)
    assert made == {"names": ["oracle", "kept"], "gold": {("ehrsql", "q1")}, "api_keys": {"kept": "sk-1"},
                    "sandbox": "unsafe: test"}
    assert plan.sandbox == "unsafe: test"
    assert [(batch.trials[0][0].name, batch.limit) for batch in plan.batches(10)] == [
        ("oracle", None), ("kept", "llm-endpoint:gpu-box")]


def test_the_tally_counts_errors_and_logs_at_intervals_but_not_after_the_last_trial():
    now = [100.0]
    logged = []
    tally = TrialTally(3, log=lambda count: logged.append(count.describe()), log_every_s=30, clock=lambda: now[0])
    now[0] = 110.0
    tally.add({"status": "error"})  # 10 s since the start: too soon
    now[0] = 131.0
    tally.add({"status": "invalid"})  # 31 s: logged; an invalid trial is not a failed one
    now[0] = 170.0
    tally.add({"status": "completed"})  # 39 s since the last line, but the last trial: the run says it is done
    assert logged == ["trials: 2 of 3 done (67%), 1 failed"]
    assert (tally.done, tally.failed, tally.elapsed()) == (3, 1, 70.0)
    assert tally.describe() == "3 (1 failed) in 70 s"


def test_the_summary_links_the_artifacts_the_run_made(tmp_path, monkeypatch):
    store = ResultStore(tmp_path, "r1")
    run_tasks = tasks("ehrsql/q1", "dq/audit", "ehrsql/q2")
    monkeypatch.setattr(plan_module, "isolation", lambda allow_unsafe: pytest.fail("probed the sandbox"))
    plan = plan_run(parse_agents(["oracle"]), run_tasks, 2, set(), load_secret=str)
    tally = TrialTally(6, clock=lambda: 0.0)
    url = "http://prefect/artifacts/{}".format
    plain = summary_markdown(store, "b1", plan, tally, None, compared=False, artifact_url=url).splitlines()
    assert "- tasks: 3 (1 dq, 2 ehrsql), 2 trial(s) each" in plain  # suites in name order
    assert "- agents: `oracle`" in plain and "- trials run now: 0 (0 failed) in 0 s" in plain
    assert "- dashboard: not rendered; `make report RUN_ID=r1`" in plain
    links = [line for line in plain if line.startswith("- [")]
    assert links == ["- [evaluation-metrics](http://prefect/artifacts/evaluation-metrics)"]
    full = summary_markdown(store, "b1", plan, tally, "file:///site/index.html", compared=True, artifact_url=url)
    assert [line.split("]")[0] for line in full.splitlines() if line.startswith("- [")] == [
        "- [evaluation-metrics", "- [evaluation-comparison", "- [evaluation-report-summary"]
    assert "- dashboard: [file:///site/index.html](file:///site/index.html)" in full.splitlines()


def test_metric_rows_are_rounded_to_four_decimals_floats_only():
    assert rounded({"agent": "a", "tasks": 3, "success_rate": 2 / 3, "cost_usd": 0.00004}) == \
        {"agent": "a", "tasks": 3, "success_rate": 0.6667, "cost_usd": 0.0}


def test_the_evaluation_library_does_not_import_prefect():
    graph = grimp.build_graph("ehrbench", include_external_packages=True)
    importers = {module for module in graph.find_modules_that_directly_import("prefect")
                 if not module.startswith("ehrbench.cli")}  # the command line starts Prefect; the library does not
    assert importers == set()
