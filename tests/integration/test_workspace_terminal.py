"""Terminal agents on the demo build's workspace tasks, HealthAgentBench's setting: the real openai SDK against a
scripted OpenAI-compatible server whose script works in the task folder with run_shell. On the audit task
(dq_interface=terminal) it writes flagged_rows.csv with shell commands; on a MEDS conversion task it writes and runs
its own converter. The commands ran confined, and the verifier passes both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ehrbench.agents.config import parse_agents
from ehrbench.agents.llm_agent import LlmAgent
from ehrbench.agents.sandbox import isolation
from ehrbench.dq.score import read_labels, read_submission
from ehrbench.evaluation.tasks import load_tasks
from ehrbench.evaluation.trial import run_trial
from tests.llm_servers import OpenAIServer

pytestmark = pytest.mark.integration

PANDAS_CONVERSION = Path(__file__).parents[1] / "meds_pandas_conversion.py"


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


def test_a_terminal_agent_converts_raw_tables_to_meds_in_its_workspace_and_passes_the_verifier(demo, tmp_path):
    """HealthAgentBench's format-conversion setting: the script writes its own converter (an independent pandas
    implementation of the instruction, tests/meds_pandas_conversion.py) into the workspace and runs it there."""
    task = load_tasks(demo, ("meds_conversion",))[0]
    converter = PANDAS_CONVERSION.read_text()
    with OpenAIServer() as server:
        server.tool_call("run_shell", {"command": "id -u; pwd; ls; ls data/hosp; head -5 event_config.yaml"})
        server.tool_call("run_shell", {"command": f"cat > convert.py <<'PY'\n{converter}\nPY\npython convert.py"})
        server.tool_call("submit_workspace", {})
        [config] = parse_agents([f"llm:scripted@{server.base_url}"], {"max_retries": 0})
        row = run_trial(LlmAgent(config, sandbox=isolation(allow_unsafe=False)), task, 0, "b", tmp_path)
        bodies = server.bodies()
    assert row["status"] == "completed", row["error"]
    assert (row["reward"], row["correct"], row["sandbox"]) == (1.0, True, "bubblewrap"), row["verifier_metrics"]
    assert {tool["function"]["name"] for tool in bodies[0]["tools"]} == {"run_shell", "submit_workspace"}
    assert "event_config.yaml" in bodies[0]["messages"][0]["content"]  # the instruction is in the system prompt
    looked, converted = [m["content"] for m in json.loads(row["transcript"]) if m.get("role") == "tool"][:2]
    assert looked.startswith("exit status 0") and "65534\n/workspace\n" in looked and "gold" not in looked
    events = json.loads(row["verifier_metrics"])["events_found"]
    assert converted.startswith("exit status 0") and f"meds/data/0.parquet: {events} events" in converted
    workspace = Path(row["workspace_path"])  # kept for inspection, with what the agent wrote
    assert (workspace / "convert.py").is_file() and (workspace / "meds" / "data" / "0.parquet").is_file()
