"""Replays of issue 17's unbounded scoring: `ehrbench dq score` on a 300 MB submission took 220 s and 4.5 GB, and on
a FIFO it hung; a non-JSON reply from an LLM endpoint was recorded without the endpoint's name. A submission over the
size limit or that is not a regular file must now be refused at once, unopened, in one line naming the file (and its
size and the limit); an endpoint's HTML page must be recorded as an error naming its model and base URL.

The `ehrbench` subprocesses run with their address space capped: were the size check ever lost again, the replay
fails on a MemoryError instead of taking the shared machine down. Their own timeout bounds the FIFO replay.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ehrbench.agents.config import parse_agent
from ehrbench.agents.llm_agent import LlmAgent
from ehrbench.dq.score import read_submission
from ehrbench.evaluation.trial import run_trial
from ehrbench.tasks import EvalTask, Gold, TaskView
from tests.bounded import finished_within
from tests.llm_servers import OpenAIServer

pytestmark = pytest.mark.security

EHRBENCH = str(Path(sys.executable).with_name("ehrbench"))
MEMORY_CAP = 4 * 2**30  # bytes of address space; a refusal needs a small fraction of it
PROMPT_S = 30.0  # the command's imports included; the fault took 220 s
LABELS = [dict(table="labs", row_id="aaaa000000000001", cluster_id="c1", family="impossible_values",
               subtype="decimal_shift", field="value", original_value="1.2", corrupted_value="120")]


@pytest.fixture
def task(tmp_path) -> Path:
    (tmp_path / "gold").mkdir()
    pq.write_table(pa.Table.from_pylist(LABELS), tmp_path / "gold" / "labels.parquet")
    return tmp_path


def _capped_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _dq_score(task: Path, submission: Path) -> tuple[subprocess.CompletedProcess, float]:
    started = time.perf_counter()
    result = subprocess.run([EHRBENCH, "dq", "score", str(task), str(submission)], capture_output=True, text=True,
                            timeout=120, preexec_fn=_capped_memory)
    return result, time.perf_counter() - started


def test_a_300_mb_submission_is_refused_at_once(task):
    submission = task / "flagged_rows.csv"
    with open(submission, "wb") as handle:  # 300 MB of lines, most of them a hole on disk
        handle.write(b"table,_row_id\n" + b"labs,aaaa000000000001\n" * 1000)
        handle.truncate(300 * 10**6)
    result, elapsed = _dq_score(task, submission)
    assert result.returncode == 2 and result.stdout == "" and elapsed < PROMPT_S
    assert result.stderr == (f"ehrbench: error: refused submission {submission}: 286.1 MiB is over the 64.0 MiB "
                             "limit (flagging every row of a task's extract takes about 8 MiB)\n")


def test_a_fifo_submission_is_refused_without_waiting_for_a_writer(task):
    fifo = task / "flagged_rows.csv"
    os.mkfifo(fifo)
    result, elapsed = _dq_score(task, fifo)  # a hang ends in TimeoutExpired after 120 s
    assert result.returncode == 2 and elapsed < PROMPT_S
    assert result.stderr == (f"ehrbench: error: refused submission {fifo}: it is a FIFO, not a regular file "
                             "(flagged_rows.csv)\n")
    # a trial's scoring reads submissions the same way: refused, scored as empty
    submission, elapsed = finished_within(10, read_submission, fifo)
    assert submission.rows == set() and "it is a FIFO" in submission.problem and elapsed < 2


def test_an_endpoints_html_page_is_recorded_naming_the_endpoint(tmp_path):
    database = tmp_path / "ehr.duckdb"
    with duckdb.connect(str(database)) as con:
        con.execute("create table patients as select 1 as subject_id")
    task = EvalTask(TaskView("ehrsql", "q1", "mimic_iv", "How many patients are there?", database=database),
                    Gold(True, "[['1']]"))
    with OpenAIServer() as server:
        server.raw("<html><body><h1>502 Bad Gateway</h1><p>nginx</p></body></html>", "text/html")
        agent = LlmAgent(parse_agent(f"llm:scripted@{server.base_url}", {"max_retries": 0, "timeout_s": 5}))
        row = run_trial(agent, task, 0, "b1", tmp_path / "artifacts")
    assert (row["status"], row["reward"]) == ("error", 0.0)
    assert row["error"] == (f"ChatError: openai:scripted@{server.base_url}: unreadable reply: the reply is not JSON: "
                            "'<html><body><h1>502 Bad Gateway</h1><p>nginx</p></body></html>'")
