"""Task sets on a real build: the published EHRSQL-2024 valid split imported against a demo build reproduces every
published answer, and the evaluate-agents flow runs a task set beside a generated suite — oracle scores 100 on it,
abstain exactly its unanswerable share, each in a metric row of its own. FHIR-AgentBench's question file imports on
the build's mimic_iv_on_fhir view, which holds its gold ids, and the oracle scores 1 on it.

Uses the session's demo build (or the build folder $EHRBENCH_DEMO_BUILD) read-only: it is linked into a temporary
data directory, which gets the task sets and the results."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from ehrbench.evaluation.results import load_trials
from ehrbench.evaluation.taskset_metrics import metric_table_by_taskset
from ehrbench.tasksets.importer import plan_import, run_import
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.integration

VALID = SHARED_DATA / "ehrsql-2024" / "mimic_iv" / "valid"
FHIR_AGENTBENCH = SHARED_DATA / "fhir-agentbench" / "questions_answers_fhir.csv"


def _trials(run_folder: Path) -> list[dict]:
    """One row per trial, as every reader of results sees them."""
    with duckdb.connect() as con:
        load_trials(con, run_folder)
        return con.execute("select * from trials").to_arrow_table().to_pylist()


@pytest.fixture(scope="module")
def valid(demo_data):
    if not VALID.is_dir():
        pytest.skip(f"EHRSQL-2024 data not found at {VALID}")
    return run_import(plan_import(demo_data, "ehrsql2024", [VALID]))


def test_the_published_valid_split_is_reproduced_on_the_demo_build(valid):
    report = valid.reproduction
    print(f"EHRSQL-2024 valid on the demo build: {report.describe()}")
    assert (valid.name, valid.tasks, valid.answerable) == ("ehrsql2024-valid", 1163, 931)
    assert (report.executed, report.compared, report.reproduced, report.mismatches) == (931, 931, 931, [])


def test_oracle_and_abstain_run_a_task_set_apart_from_the_generated_suite(demo_data, valid, demo, prefect_api_url):
    from flows.evaluate import evaluate_agents

    chatqa_export = demo / "exports" / "chatqa"
    chatqa = run_import(plan_import(demo_data, "ehrchatqa", sorted(chatqa_export.glob("*_incre.json")), "chatqa-incre"))
    assert chatqa.reproduction.compared == chatqa.reproduction.reproduced > 0
    folder = evaluate_agents(agents=["oracle", "abstain"], suites=["ehrsql"], tasksets=[valid.name, chatqa.name],
                             limit=40, run_id="tasksets", data_dir=str(demo_data.root), report=False)
    rows = {(row["agent"], row["suite"], row["taskset"]): row for row in metric_table_by_taskset(Path(folder))}
    assert set(rows) == {(agent, suite, taskset) for agent in ("abstain", "oracle") for suite, taskset in (
        ("ehrsql", None), ("ehrsql", valid.name), ("chatqa", chatqa.name))}
    oracle, abstain = rows[("oracle", "ehrsql", valid.name)], rows[("abstain", "ehrsql", valid.name)]
    assert oracle["tasks"] == 40 and oracle["RS(10)"] == 1.0 and rows[("oracle", "chatqa", chatqa.name)][
        "success_rate"] == 1.0
    import duckdb

    unanswerable = duckdb.sql(
        f"select avg(case when is_answerable then 0 else 1 end) from read_parquet('{folder}/*.parquet') "
        f"where agent = 'abstain' and taskset = '{valid.name}'").fetchone()[0]
    assert 0 < unanswerable < 1 and abstain["RS(10)"] == pytest.approx(unanswerable)


def test_fhir_agentbench_runs_on_the_view_its_questions_were_answered_on(demo_data, prefect_api_url):
    """The published file on the mimic_iv_on_fhir view: every gold id but the two whose chartevents rows the shared
    demo lacks is there, and the oracle (the published answer and ids) scores 1 with retrieval P = R = 1."""
    if not FHIR_AGENTBENCH.is_file():
        pytest.skip(f"FHIR-AgentBench's question file not found at {FHIR_AGENTBENCH}")
    from flows.evaluate import evaluate_agents

    imported = run_import(plan_import(demo_data, "fhir-agentbench", [FHIR_AGENTBENCH]))
    coverage = imported.reproduction.fhir_ids
    assert imported.tasks == 2931 and imported.targets == ["fhir/mimic_iv_on_fhir"] and not imported.warnings
    assert sum(c.published for c in coverage.values()) == 27_634
    assert {kind: c.published - c.found for kind, c in coverage.items() if c.found < c.published} == {"Observation": 2}
    folder = evaluate_agents(agents=["oracle"], suites=["fhir"], tasksets=[imported.name], limit=30,
                             run_id="fhir-agentbench", data_dir=str(demo_data.root), report=False)
    (row,) = [row for row in metric_table_by_taskset(Path(folder)) if row["taskset"] == imported.name]
    assert (row["agent"], row["suite"], row["tasks"]) == ("oracle", "fhir", 30)
    assert (row["success_rate"], row["retrieval_precision"], row["retrieval_recall"]) == (1.0, 1.0, 1.0)
    # FHIR-AgentBench's own scores beside ours: its judge's steps (no judge model: rule 1 and the match) accept every
    # answer; its recall is 1, its precision 1 except on an empty gold, where it is 0 by its definition
    trials = [t for t in _trials(Path(folder)) if t["taskset"] == imported.name]
    assert len(trials) == 30 and all(t["published_correct"] for t in trials)
    assert all(t["published_retrieval_recall"] == 1.0 for t in trials)
    assert all(t["published_retrieval_precision"] == (1.0 if t["retrieved_fhir_ids"] else 0.0) for t in trials)
    assert any(not t["retrieved_fhir_ids"] for t in trials) and any(t["retrieved_fhir_ids"] for t in trials)


def test_the_papers_five_agents_run_through_a_model_server_in_process_and_over_http(demo_data, demo, prefect_api_url):
    """Each of FHIR-AgentBench's agent designs, as an LLM agent over HTTP (a scripted OpenAI-compatible server that
    fetches the patient's encounters, runs code when offered only code, and answers), on the imported task set, once
    reading the build's view in-process and once asking `ehrbench fhir serve` over HTTP (`fhir_base_url`): every
    trial completes with the tools its design offers, retrieves the same encounters either way and is scored both
    ways."""
    if not FHIR_AGENTBENCH.is_file():
        pytest.skip(f"FHIR-AgentBench's question file not found at {FHIR_AGENTBENCH}")
    import re

    from ehrbench.fhir.server import create_app
    from ehrbench.layout import BuildLayout
    from flows.evaluate import evaluate_agents
    from tests.fhir_fakes import serving
    from tests.llm_servers import OpenAIServer, Reply

    name = "fhir-agentbench"
    if not (demo_data.tasksets / name).is_dir():
        run_import(plan_import(demo_data, "fhir-agentbench", [FHIR_AGENTBENCH]))
    offered: set[tuple[str, ...]] = set()

    def policy(request) -> Reply:
        messages = request.body["messages"]
        tools = tuple(t["function"]["name"] for t in request.body.get("tools") or ())
        offered.add(tools)
        patient = re.search(r"Patient FHIR ID is ([0-9a-f-]+)\.", messages[1]["content"]).group(1)
        fetched = any(m["role"] == "tool" for m in messages)
        if tools == ("execute_python_code",):
            code = "answer = len(retrieved_resources['Encounter'])"
            return Reply(tool_calls=(("execute_python_code", {"code": code}),))
        if tools and not fetched:
            if "fhir_request_get" in tools:
                return Reply(tool_calls=(("fhir_request_get", {"query_string": f"Encounter?patient={patient}"}),))
            return Reply(tool_calls=(("get_resources_by_patient_fhir_id",
                                      {"resource_type": "Encounter", "patient_fhir_id": patient}),))
        return Reply(text="The final answer is: 1")

    designs = ("single_turn_query_generator", "single_turn_retriever", "single_turn_retriever_code",
               "multi_turn_retriever", "multi_turn_retriever_code")
    view = BuildLayout(demo).fhir_view_resources("mimic_iv_on_fhir")
    with OpenAIServer() as server, serving(create_app(view)) as fhir_url:
        server.respond(policy)
        agents = [{"name": f"{design}{suffix}", "model": f"openai:scripted@{server.base_url}",
                   "options": {"fhir_variant": design, "max_retries": 0, **options}}
                  for design in designs for suffix, options in (("", {}), ("@http", {"fhir_base_url": fhir_url}))]
        folder = evaluate_agents(agents=agents, tasksets=[name], limit=1, run_id="five-designs",
                                 data_dir=str(demo_data.root), report=False)
    trials = _trials(Path(folder))
    assert sorted(t["agent"] for t in trials) == sorted(a["name"] for a in agents)
    assert all(t["status"] == "completed" and t["stop_reason"] == "finished" for t in trials), trials
    assert all(t["retrieved_fhir_ids"] and t["published_correct"] is not None for t in trials)
    assert all(t["published_retrieval_precision"] is not None for t in trials)
    retrieved = {t["agent"]: t["retrieved_fhir_ids"] for t in trials}
    assert all(retrieved[design] == retrieved[f"{design}@http"] for design in designs)
    assert offered == {
        ("fhir_request_get",), ("get_resources_by_patient_fhir_id",), ("execute_python_code",), (),
        ("get_resources_by_patient_fhir_id", "get_resources_by_resource_id"),
        ("get_resources_by_patient_fhir_id", "get_resources_by_resource_id", "execute_python_code")}
