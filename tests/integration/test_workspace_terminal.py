"""A terminal agent on the demo build's audit task (dq_interface=terminal, HealthAgentBench's setting): the real openai
SDK against a scripted OpenAI-compatible server whose script looks around the workspace with run_shell, writes
flagged_rows.csv there with shell commands, and submits; the command ran confined, and the verifier passes it."""

from __future__ import annotations

import json

import pytest

from ehrbench.agents.config import parse_agents
from ehrbench.agents.llm_agent import LlmAgent
from ehrbench.agents.sandbox import isolation
from ehrbench.dq.score import read_labels, read_submission
from ehrbench.evaluation.tasks import load_tasks
from ehrbench.evaluation.trial import run_trial
from tests.llm_servers import OpenAIServer

pytestmark = pytest.mark.integration


def test_a_terminal_agent_audits_in_its_workspace_and_passes_the_verifier(demo, tmp_path):
    task = next(t for t in load_tasks(demo, ("dq",)) if t.view.task_id == "combined")
    first_of_cluster: dict[str, tuple[str, str]] = {}
    for label in read_labels(task.gold.dq_task_dir):
        first_of_cluster.setdefault(label["cluster_id"], (label["table"], label["row_id"]))
    lines = "".join(f"{table},{row}\n" for table, row in sorted(first_of_cluster.values()))
    with OpenAIServer() as server:
        server.tool_call("run_shell", {"command": "id -u; pwd; ls; ls data | head -3"})
        server.tool_call("run_shell", {"command": "printf 'table,_row_id\\n' > flagged_rows.csv && "
                                                  f"printf '{lines}' >> flagged_rows.csv && "
                                                  "wc -l < flagged_rows.csv"})
        server.tool_call("submit_audit", {})
        [config] = parse_agents([f"llm:scripted@{server.base_url}"], {"dq_interface": "terminal", "max_retries": 0})
        row = run_trial(LlmAgent(config, sandbox=isolation(allow_unsafe=False)), task, 0, "b", tmp_path)
        bodies = server.bodies()
    assert row["status"] == "completed", row["error"]
    assert (row["reward"], row["dq_recall"], row["sandbox"]) == (1.0, 1.0, "bubblewrap")
    assert read_submission(row["flagged_rows_path"]).rows == set(first_of_cluster.values())
    # the agent was offered the terminal, not the SQL tools, and its commands ran as nobody in the task folder
    offered = {tool["function"]["name"] for tool in bodies[0]["tools"]}
    assert offered == {"run_shell", "submit_audit"}
    results = [m["content"] for m in json.loads(row["transcript"]) if m.get("role") == "tool"]
    looked, wrote = results[0], results[1]
    assert looked.startswith("exit status 0") and "65534\n/workspace\ndata\ninstruction.md" in looked
    assert "gold" not in looked.split("--- stderr ---")[0]  # the task's gold is not in the workspace
    assert wrote.startswith("exit status 0") and f"\n{len(first_of_cluster) + 1}\n" in wrote
